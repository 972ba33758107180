package deployflow_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/deployflow/deployflow/internal/searchattr"
)

type composeService struct {
	Image       string            `json:"image"`
	Build       map[string]string `json:"build"`
	User        string            `json:"user"`
	Environment map[string]string `json:"environment"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Entrypoint      []string       `json:"entrypoint"`
	Command         []string       `json:"command"`
	Healthcheck     map[string]any `json:"healthcheck"`
	Networks        []string       `json:"networks"`
	Restart         string         `json:"restart"`
	StopGracePeriod string         `json:"stop_grace_period"`
	Configs         []struct {
		Source string `json:"source"`
		Target string `json:"target"`
	} `json:"configs"`
}

type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
	Configs  map[string]struct {
		Content string `json:"content"`
	} `json:"configs"`
	Networks map[string]struct {
		External bool `json:"external"`
	} `json:"networks"`
}

func readCompose(t *testing.T, path string) composeFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.UnmarshalStrict(b, &f), "%s must be valid compose YAML of the fields we use", path)
	return f
}

// No Docker engine runs on our machines, so docker-compose.yml is checked
// for what a user relies on, from its parsed structure: Temporal as its
// current guidance runs it (temporalio/server, schema by admin-tools; not
// the deprecated auto-setup image), every service waiting for what it
// needs to be healthy, and a worker that can read a private kubeconfig.
func TestDockerComposeFile(t *testing.T) {
	f := readCompose(t, "docker-compose.yml")
	for _, name := range []string{"postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "worker"} {
		require.Contains(t, f.Services, name, "service %s", name)
	}
	for name, s := range f.Services {
		assert.NotContains(t, s.Image, "auto-setup", "%s: the auto-setup image is deprecated upstream", name)
	}

	schema := f.Services["temporal-schema"]
	assert.True(t, strings.HasPrefix(schema.Image, "temporalio/admin-tools:"))
	assert.Equal(t, "service_healthy", schema.DependsOn["postgresql"].Condition)
	script := strings.Join(schema.Command, " ")
	for _, want := range []string{"temporal-sql-tool --plugin postgres12 --ep postgresql", "setup-schema -v 0.0", "update-schema -d /etc/temporal/schema/postgresql/v12/$$dir/versioned", "temporal temporal_visibility"} {
		assert.Contains(t, script, want)
	}

	temporal := f.Services["temporal"]
	server, _ := strings.CutPrefix(temporal.Image, "temporalio/server:")
	assert.NotEqual(t, temporal.Image, server, "Temporal runs from temporalio/server")
	assert.Equal(t, strings.TrimPrefix(schema.Image, "temporalio/admin-tools:"), server, "schema tools and server are the same version")
	assert.Equal(t, "service_completed_successfully", temporal.DependsOn["temporal-schema"].Condition)
	assert.Equal(t, "postgres12", temporal.Environment["DB"])
	assert.Equal(t, "postgresql", temporal.Environment["POSTGRES_SEEDS"], "Temporal must point at the postgresql service")
	assert.Equal(t, "0.0.0.0", temporal.Environment["BIND_ON_IP"])
	assert.Contains(t, temporal.Ports, "7233:7233")
	require.Len(t, temporal.Configs, 1)
	assert.Equal(t, "/etc/temporal/"+temporal.Environment["DYNAMIC_CONFIG_FILE_PATH"], temporal.Configs[0].Target, "the dynamic config is where the server reads it")
	assert.Contains(t, f.Configs[temporal.Configs[0].Source].Content, "frontend.enableUpdateWorkflowExecution")

	setup := f.Services["temporal-setup"]
	assert.Equal(t, "service_healthy", setup.DependsOn["temporal"].Condition)
	cmd := strings.Join(setup.Command, " ")
	assert.Contains(t, cmd, "temporal operator namespace create -n default", "the server image does not create the default namespace")
	for _, sa := range searchattr.Registration() {
		name, typ, _ := strings.Cut(sa, "=")
		assert.Contains(t, cmd, "--name "+name+" --type "+typ, "search attribute %s registered", sa)
	}

	ui := f.Services["temporal-ui"]
	assert.True(t, strings.HasPrefix(ui.Image, "temporalio/ui:"))
	assert.Equal(t, "temporal:7233", ui.Environment["TEMPORAL_ADDRESS"])
	assert.Equal(t, "false", ui.Environment["TEMPORAL_UI_START_WORKFLOW_DISABLED"], "the UI's Start Workflow form must be on")

	w := f.Services["worker"]
	assert.Equal(t, "Dockerfile", w.Build["dockerfile"])
	assert.Equal(t, "service_completed_successfully", w.DependsOn["temporal-setup"].Condition)
	assert.Equal(t, "temporal:7233", w.Environment["TEMPORAL_ADDRESS"])
	assert.Equal(t, "deployflow", w.Environment["DEPLOYFLOW_TASK_QUEUE"])
	assert.Equal(t, "0.0.0.0:9464", w.Environment["DEPLOYFLOW_METRICS_ADDRESS"], "metrics must be reachable from outside the container")
	assert.Contains(t, w.Ports, "9464:9464")
	// A 0600 kubeconfig owned by the host user is readable only as that user.
	assert.Equal(t, "${DEPLOYFLOW_UID:-65532}:${DEPLOYFLOW_GID:-65532}", w.User)
	require.Len(t, w.Volumes, 1)
	source, rest, ok := strings.Cut(w.Volumes[0], "}:")
	require.True(t, ok, "a ${KUBECONFIG_FILE:-...} source")
	assert.Equal(t, "${KUBECONFIG_FILE:-~/.kube/config", source)
	assert.Equal(t, w.Environment["KUBECONFIG"]+":ro", rest, "KUBECONFIG is the mounted file, read-only")
	assert.Equal(t, []any{"CMD", "/usr/local/bin/deployflow-worker", "healthcheck"}, w.Healthcheck["test"],
		"the distroless image has no shell: the worker checks itself")
	for _, name := range []string{"postgresql", "temporal", "worker"} {
		assert.NotEmpty(t, f.Services[name].Healthcheck, "%s has a healthcheck", name)
	}

	kind := readCompose(t, "docker-compose.kind.yml")
	assert.ElementsMatch(t, []string{"default", "kind"}, kind.Services["worker"].Networks)
	assert.True(t, kind.Networks["kind"].External, "kind's network exists already")

	df, err := os.ReadFile("Dockerfile")
	require.NoError(t, err, "the worker is built from Dockerfile")
	assert.Contains(t, string(df), "./worker")
	assert.Contains(t, string(df), "./starter")
}
