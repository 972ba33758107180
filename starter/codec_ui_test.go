package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/codec"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// The Temporal UI, pointed at the codec server (its "Codec Server"
// settings: the server's address, "include cross-origin credentials"),
// shows a lease's manifest decoded, its secret value included, to an
// operator who signed in at the codec server's /login with a token; the
// same UI in a browser that did not sign in shows no secret. Both in a
// real browser (headless Chromium) against the stack's UI.
func TestTheUIShowsTheDecodedManifestToASignedInOperator(t *testing.T) {
	chromium := browser(t)
	env := testenv.Get(t).WithCodec(t)
	tq := env.WorkerWith(t, func(a *activities.Activities) { a.Limits.Secrets = true })
	lease := testenv.ShortName("uicodec")
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowID(lease), "", "test over")
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
	})
	const marker = "mArKeR-ui-d3c0d3d-0x4713"
	file := filepath.Join(t.TempDir(), "app.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`lease: `+lease+`
services:
  - name: api
    image: nginx:1.27
    secretEnv: {API_KEY: `+marker+`}
`), 0o644))
	run := func(args ...string) string {
		out, _ := cli(t, env.Env, tq, append(args, "--codec-keys-file", env.KeysFile)...)
		return out
	}
	run("lease", "create", lease, "--owner", "acme")
	assert.Contains(t, run("deploy", "-f", file, "--wait"), "Active, deploy #1")
	desc, err := env.Temporal.DescribeWorkflowExecution(context.Background(), api.DeployWorkflowID(lease), "")
	require.NoError(t, err)
	page := fmt.Sprintf("%s/namespaces/default/workflows/%s/%s/history", devstack.TemporalUIURL,
		url.PathEscape(api.DeployWorkflowID(lease)), desc.WorkflowExecutionInfo.Execution.RunId)

	// The codec server as an operator runs it, on a loopback port of its
	// own: the UI's site, another origin, allowed by CORS.
	const token = "operator-token-ui-0123456789"
	encrypted := base64.StdEncoding.EncodeToString([]byte(codec.EncodingEncrypted))
	srv := httptest.NewServer(codec.Handler(env.Codec, codec.ServerOptions{Tokens: []string{token}, Origins: []string{devstack.TemporalUIURL}}))
	defer srv.Close()

	// view opens the workflow's page in a new browser whose UI decodes
	// through the codec server (the settings its Codec Server dialog
	// writes to the browser's storage), after signing in there when
	// signIn, and returns the page's text once it shows all of want.
	view := func(signIn bool, want ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))...)
		defer cancelAlloc()
		b, cancelBrowser := chromedp.NewContext(alloc)
		defer cancelBrowser()
		var steps []chromedp.Action[chromedp.Void]
		if signIn {
			steps = append(steps,
				chromedp.Navigate(srv.URL+"/login"),
				chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), token),
				chromedp.Submit(chromedp.CSS(`form`)))
		}
		require.NoError(t, chromedp.Do(b, steps...))
		if signIn {
			testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the codec server's /login never signed in", func() (bool, string) {
				text, err := chromedp.Run(b, chromedp.Evaluate[string](`document.body.innerText`))
				return err == nil && strings.Contains(text, "Signed in"), text
			})
		}
		require.NoError(t, chromedp.Do(b, chromedp.Navigate(devstack.TemporalUIURL+"/namespaces/default/workflows")))
		_, err := chromedp.Run(b, chromedp.Evaluate[bool](fmt.Sprintf(`localStorage.setItem("endpoint", %q);
localStorage.setItem("includeCredentials", "true");
localStorage.setItem("passAccessToken", "false");
localStorage.setItem("overrideRemoteCodecConfiguration", "true");
true`, `"`+srv.URL+`"`)))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(b, chromedp.Navigate(page)))
		// The input is decoded (or not), and a failed decode reported,
		// after the page shows: read its text until want is there (CI's
		// PostgreSQL phase once read it between the encrypted payload and
		// the UI's "could not connect").
		var text string
		testenv.Eventually(t, time.Minute, 500*time.Millisecond, "the UI never showed the workflow's input", func() (bool, string) {
			var err error
			if text, err = chromedp.Run(b, chromedp.Evaluate[string](`document.body.innerText`)); err != nil {
				return false, err.Error()
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					return false, text
				}
			}
			return true, ""
		})
		return text
	}

	signedIn := view(true, marker)
	assert.Contains(t, signedIn, marker, "the signed-in operator sees the manifest decoded, its secret value included")
	assert.Contains(t, signedIn, "nginx:1.27")

	// The UI shows a payload it could not decode as stored: its metadata
	// in base64.
	anonymous := view(false, encrypted, "Codec Server could not connect")
	assert.NotContains(t, anonymous, marker, "a browser that did not sign in sees no secret")
	assert.NotContains(t, anonymous, "nginx:1.27", "nor the manifest")
	assert.Contains(t, anonymous, "Codec Server could not connect", "and the UI says it could not decode")
}

// browser is the path of the Chromium the UI tests drive: Debian's
// (apt-get install chromium; CI installs it). Outside CI a machine without
// it skips them, naming the package.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium: .ci/run installs Debian's chromium package")
	}
	t.Skip("the UI tests drive a headless Chromium: apt-get install chromium")
	return ""
}
