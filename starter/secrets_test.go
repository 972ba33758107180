package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/codec"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// webhook records the notifications a worker sends.
type webhook struct {
	mu     sync.Mutex
	bodies []string
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.bodies = append(h.bodies, string(b))
	h.mu.Unlock()
}

func (h *webhook) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.bodies, "\n")
}

// payloadData is the text of every payload's data in the temporal CLI's
// JSON output (where it is base64).
func payloadData(out string) string {
	var doc any
	if json.Unmarshal([]byte(out), &doc) != nil {
		return out
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if s, ok := x.(string); ok && k == "data" {
					if d, err := base64.StdEncoding.DecodeString(s); err == nil {
						b.Write(d)
						b.WriteByte('\n')
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(doc)
	return b.String()
}

// rawStore is everything Temporal stores for the workflows of task queue
// tq, as the raw (non-decoding) client reads it: each run's visibility
// record (memo, search attributes) and every event of its history.
func rawStore(t *testing.T, env *testenv.CodecEnv, tq string) (all string, events map[string][]string) {
	t.Helper()
	ctx := context.Background()
	var b bytes.Buffer
	events = map[string][]string{}
	var token []byte
	for {
		resp, err := env.Raw.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("TaskQueue = %q", tq), NextPageToken: token})
		require.NoError(t, err)
		for _, ex := range resp.Executions {
			rec, _ := proto.Marshal(ex)
			b.Write(rec)
			id := ex.Execution.WorkflowId + "/" + ex.Execution.RunId
			it := env.Raw.GetWorkflowHistory(ctx, ex.Execution.WorkflowId, ex.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				e, err := it.Next()
				require.NoError(t, err)
				raw, _ := proto.Marshal(e)
				b.Write(raw)
				events[id] = append(events[id], string(raw))
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return b.String(), events
		}
	}
}

// Issue 37.3: a marker secret, given as a private registry's password and
// as a secret env value, is in the lease namespace's Secrets (which the
// pods refer to) and nowhere else: not in any Temporal history or
// visibility record read with the raw client, not in the CLI's output in
// any format (status, history, plans), not in the notifications, not in
// the worker's log. A new value (a redeploy) is a new Secret and rolls
// the pods; the old ReplicaSet keeps its Secret. The codec server decodes
// the lease's history for the temporal CLI of an authenticated operator
// only. And a deploy typed as plain JSON into the temporal CLI or the
// UI's Start Workflow form still works with the codec on, its secret in
// no event after the one it typed; a Schedule's redeploy too.
func TestASecretIsInTheLeasesSecretsAndNowhereElse(t *testing.T) {
	env := testenv.Get(t).WithCodec(t)
	hook := &webhook{}
	hookSrv := httptest.NewServer(hook)
	defer hookSrv.Close()
	tq := env.WorkerWith(t, func(a *activities.Activities) {
		a.Limits.Secrets = true // as the worker binary with --codec-keys-file
		a.Notifier = &activities.Notifier{URL: hookSrv.URL, Client: http.DefaultClient}
	})
	lease := testenv.ShortName("secret")
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowID(lease), "", "test over")
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
	})
	const marker, marker2 = "mArKeR-s3cr3t-0x4711", "mArKeR-r0tat3d-0x4712"
	dir := t.TempDir()
	const rolling, canary = `{strategy: RollingUpdate}`, `{strategy: Canary, steps: [{setWeight: 50}, {pause: {duration: 1s}}]}`
	write := func(name, password, rollout string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(`lease: `+lease+`
services:
  - name: web
    image: ghcr.io/acme/web:1.0
    replicas: 2
    credentials: {host: ghcr.io, username: acme-bot, password: `+password+`}
    env: {LOG_LEVEL: info}
    secretEnv: {DB_PASSWORD: `+password+`}
    rollout: `+rollout+`
`), 0o644))
		return p
	}
	var outputs []string
	run := func(args ...string) string {
		out, errOut := cli(t, env.Env, tq, append(args, "--codec-keys-file", env.KeysFile)...)
		outputs = append(outputs, out, errOut)
		return out
	}

	// Without the keys the CLI sends nothing.
	code, _, stderr := runCLI("deploy", "-f", write("v0.yaml", marker, rolling), "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "has secrets (credentials or secretEnv), and this CLI has no codec keys")
	assert.NotContains(t, stderr, marker)

	run("lease", "create", lease, "--owner", "acme")
	out := run("deploy", "-f", write("v1.yaml", marker, rolling), "--wait")
	assert.Contains(t, out, "Active, deploy #1")

	ns := manifest.Namespace(lease)
	ctx := context.Background()
	secrets, err := env.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: manifest.SecretLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, secrets.Items, 2, "the registry login and the env values")
	byType := map[corev1.SecretType]corev1.Secret{}
	for _, s := range secrets.Items {
		byType[s.Type] = s
		assert.True(t, s.Immutable != nil && *s.Immutable, "%s is immutable", s.Name)
	}
	reg, envSecret := byType[corev1.SecretTypeDockerConfigJson], byType[corev1.SecretTypeOpaque]
	assert.Contains(t, string(reg.Data[corev1.DockerConfigJsonKey]), marker, "the registry Secret holds the password")
	assert.Contains(t, string(reg.Data[corev1.DockerConfigJsonKey]), `"ghcr.io"`)
	assert.Equal(t, marker, string(envSecret.Data["DB_PASSWORD"]))
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	for _, p := range pods.Items {
		assert.Equal(t, []corev1.LocalObjectReference{{Name: reg.Name}}, p.Spec.ImagePullSecrets, "pod %s pulls with the login", p.Name)
		var ref *corev1.SecretKeySelector
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "DB_PASSWORD" {
				assert.Empty(t, e.Value, "the pod spec holds no value")
				ref = e.ValueFrom.SecretKeyRef
			}
		}
		require.NotNil(t, ref, "pod %s takes DB_PASSWORD from the Secret", p.Name)
		assert.Equal(t, envSecret.Name, ref.Name)
	}

	// A new value: a redeploy (a canary, which notifies) rolls the pods
	// onto new Secrets; the old ReplicaSet keeps the old ones.
	out = run("deploy", "-f", write("v2.yaml", marker2, canary), "--wait")
	assert.Contains(t, out, "Active, deploy #2")
	secrets, err = env.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: manifest.SecretLabel + "=web"})
	require.NoError(t, err)
	assert.Len(t, secrets.Items, 4, "the old ReplicaSet's Secrets are kept beside the new ones")
	rss, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, rss.Items, 2, "a new value is a new pod template")

	// A Schedule's redeploy (reapply: the last-known-good manifest, its
	// secrets included) goes through with the codec on.
	id := ScheduleID(lease, api.RedeployReapply)
	run("schedule", "create", lease, "--every", "24h", "--action", "reapply")
	t.Cleanup(func() { runCLI("schedule", "delete", id, "--temporal-address", devstack.TemporalAddress) })
	trigger, err := exec.Command(env.Stack.Bin(devstack.Temporal), "schedule", "trigger", "--address", devstack.TemporalAddress, "--schedule-id", id).CombinedOutput()
	require.NoError(t, err, "temporal schedule trigger: %s", trigger)
	testenv.Eventually(t, 3*time.Minute, 250*time.Millisecond, "the scheduled reapply never ran", func() (bool, string) {
		_, out, _ := runCLI("status", lease, "-o", "json", "--temporal-address", devstack.TemporalAddress, "--codec-keys-file", env.KeysFile)
		var st api.DeployStatus
		_ = json.Unmarshal([]byte(out), &st)
		last := ""
		if len(st.History) > 0 {
			last = st.History[len(st.History)-1].Trigger + " " + st.History[len(st.History)-1].Outcome
		}
		return st.Revision == 3 && st.Phase == api.PhaseActive && !st.Pending && strings.HasPrefix(last, "schedule"), fmt.Sprintf("revision %d, %s, last %q", st.Revision, st.Phase, last)
	})

	// Every way the CLI shows the lease.
	for _, o := range []string{"text", "wide", "json", "yaml"} {
		run("status", lease, "-o", o)
		run("history", lease, "-o", o)
		run("deploy", "-f", write("v3.yaml", marker, rolling), "--plan", "-o", o)
	}
	outputs = append(outputs, hook.all())
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "no notification of the canary", func() (bool, string) {
		return hook.all() != "", "none yet"
	})

	// The codec server decodes the history for an operator with a token,
	// through the temporal CLI.
	srv := httptest.NewServer(codec.Handler(env.Codec, codec.ServerOptions{Tokens: []string{"operator-token-0123456789"}}))
	defer srv.Close()
	temporal := func(args ...string) (string, error) {
		b, err := exec.Command(env.Stack.Bin(devstack.Temporal), append(args, "--address", devstack.TemporalAddress)...).CombinedOutput()
		return string(b), err
	}
	shown, err := temporal("workflow", "show", "-w", api.DeployWorkflowID(lease), "-o", "json",
		"--codec-endpoint", srv.URL, "--codec-auth", "Bearer operator-token-0123456789")
	require.NoError(t, err, shown)
	assert.Contains(t, payloadData(shown), marker2, "the authenticated operator sees the decoded manifest")
	shown, _ = temporal("workflow", "show", "-w", api.DeployWorkflowID(lease), "-o", "json", "--codec-endpoint", srv.URL, "--codec-auth", "Bearer wrong-token-0123456789")
	assert.NotContains(t, payloadData(shown), marker2, "a wrong token decodes nothing")
	shown, _ = temporal("workflow", "show", "-w", api.DeployWorkflowID(lease), "-o", "json")
	assert.NotContains(t, payloadData(shown), marker2, "without the codec server, ciphertext")
	outputs = append(outputs, shown, payloadData(shown))

	// A deploy typed as plain JSON into the temporal CLI, and into the
	// UI's Start Workflow form: each deploys, and its secret is in no
	// event after the start the operator typed.
	typed := testenv.ShortName("typed")
	run("lease", "create", typed, "--owner", "acme")
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(typed), "", "test over")
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), manifest.Namespace(typed), metav1.DeleteOptions{})
	})
	const typedMarker = "mArKeR-typ3d-0x4713"
	started, err := temporal("workflow", "start", "--type", "DeployWorkflow", "--task-queue", tq, "--workflow-id", api.DeployWorkflowID(typed),
		"--input", `{"manifest": {"lease": "`+typed+`", "services": [{"name": "api", "image": "nginx:1.27", "secretEnv": {"API_KEY": "`+typedMarker+`"}}]}, "trigger": "ui"}`)
	require.NoError(t, err, started)
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the typed deploy never finished", func() (bool, string) {
		_, out, _ := runCLI("status", typed, "-o", "json", "--temporal-address", devstack.TemporalAddress, "--codec-keys-file", env.KeysFile)
		var st api.DeployStatus
		_ = json.Unmarshal([]byte(out), &st)
		return st.Revision == 1 && st.Phase == api.PhaseActive, fmt.Sprintf("revision %d, %s %s", st.Revision, st.Phase, st.LastError)
	})
	envSecrets, err := env.Kube.CoreV1().Secrets(manifest.Namespace(typed)).List(ctx, metav1.ListOptions{LabelSelector: manifest.SecretLabel + "=api"})
	require.NoError(t, err)
	require.Len(t, envSecrets.Items, 1)
	assert.Equal(t, typedMarker, string(envSecrets.Items[0].Data["API_KEY"]))

	// The same from the UI's Start Workflow form.
	fromUI := testenv.ShortName("ui")
	run("lease", "create", fromUI, "--owner", "acme")
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(fromUI), "", "test over")
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), manifest.Namespace(fromUI), metav1.DeleteOptions{})
	})
	uiStart(t, api.DeployWorkflowID(fromUI), "DeployWorkflow", tq,
		`{"manifest": {"lease": "`+fromUI+`", "services": [{"name": "api", "image": "nginx:1.27", "secretEnv": {"API_KEY": "`+typedMarker+`"}}]}, "trigger": "ui"}`)
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the deploy from the UI never finished", func() (bool, string) {
		_, out, _ := runCLI("status", fromUI, "-o", "json", "--temporal-address", devstack.TemporalAddress, "--codec-keys-file", env.KeysFile)
		var st api.DeployStatus
		_ = json.Unmarshal([]byte(out), &st)
		return st.Revision == 1 && st.Phase == api.PhaseActive, fmt.Sprintf("revision %d, %s %s", st.Revision, st.Phase, st.LastError)
	})

	// What Temporal stores, read raw.
	all, events := rawStore(t, env, tq)
	require.NotEmpty(t, events)
	for _, m := range []string{marker, marker2} {
		assert.NotContains(t, all, m, "Temporal stores the secret in plain text")
	}
	for id, evs := range events {
		for i, e := range evs {
			if strings.Contains(e, typedMarker) {
				assert.True(t, (strings.HasPrefix(id, api.DeployWorkflowID(typed)+"/") || strings.HasPrefix(id, api.DeployWorkflowID(fromUI)+"/")) && i == 0,
					"the typed secret is in event %d of %s: only the start the operator typed may hold it", i+1, id)
			}
		}
	}
	// Everything else deployflow showed, sent or logged.
	outputs = append(outputs, env.Log.String())
	for i, o := range outputs {
		for _, m := range []string{marker, marker2, typedMarker} {
			assert.NotContains(t, o, m, "output %d holds a secret:\n%s", i, o)
		}
	}
	assert.Contains(t, strings.Join(outputs, "\n"), manifest.Redacted, "the outputs show the secrets redacted")
}

// uiStart starts a workflow as the Temporal UI's Start Workflow form does:
// through the UI server's HTTP API, its input typed as plain JSON, with the
// CSRF token the UI server hands a browser.
func uiStart(t *testing.T, id, workflowType, tq, input string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.Get(devstack.TemporalUIURL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	u, _ := url.Parse(devstack.TemporalUIURL)
	token := ""
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "_csrf" {
			token = ck.Value
		}
	}
	body, err := json.Marshal(map[string]any{
		"workflowId":   id,
		"workflowType": map[string]string{"name": workflowType},
		"taskQueue":    map[string]string{"name": tq},
		"input": map[string]any{"payloads": []map[string]any{{
			"metadata": map[string]string{"encoding": base64.StdEncoding.EncodeToString([]byte("json/plain"))},
			"data":     base64.StdEncoding.EncodeToString([]byte(input)),
		}}},
	})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, devstack.TemporalUIURL+"/api/v1/namespaces/default/workflows/"+url.PathEscape(id), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-TOKEN", token)
	resp, err = c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the UI's start: %s", out)
}
