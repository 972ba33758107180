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

// No Docker engine runs on our machines, so docker-compose.yml is checked
// for what a user relies on: it parses, and it names the services, images,
// ports and settings that make `docker compose up --build` work.
func TestDockerComposeFile(t *testing.T) {
	b, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var f struct {
		Services map[string]struct {
			Image       string            `json:"image"`
			Build       map[string]string `json:"build"`
			Environment map[string]string `json:"environment"`
			Ports       []string          `json:"ports"`
			DependsOn   any               `json:"depends_on"`
			Command     []string          `json:"command"`
		} `json:"services"`
		Volumes map[string]any `json:"volumes"`
		Configs map[string]any `json:"configs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &f), "docker-compose.yml must be valid YAML")

	for _, name := range []string{"postgresql", "temporal", "temporal-setup", "temporal-ui", "worker"} {
		assert.Contains(t, f.Services, name, "service %s", name)
	}
	assert.True(t, strings.HasPrefix(f.Services["postgresql"].Image, "postgres:"))
	temporal := f.Services["temporal"]
	assert.True(t, strings.HasPrefix(temporal.Image, "temporalio/auto-setup:"))
	assert.Equal(t, "postgres12", temporal.Environment["DB"])
	assert.Equal(t, "postgresql", temporal.Environment["POSTGRES_SEEDS"], "Temporal must point at the postgresql service")
	assert.Contains(t, temporal.Ports, "7233:7233")
	assert.Contains(t, f.Configs, "dynamicconfig")

	ui := f.Services["temporal-ui"]
	assert.True(t, strings.HasPrefix(ui.Image, "temporalio/ui:"))
	assert.Equal(t, "temporal:7233", ui.Environment["TEMPORAL_ADDRESS"])
	assert.Equal(t, "false", ui.Environment["TEMPORAL_UI_START_WORKFLOW_DISABLED"], "the UI's Start Workflow form must be on")

	setup := strings.Join(f.Services["temporal-setup"].Command, " ")
	for _, sa := range searchattr.Registration() {
		name, typ, _ := strings.Cut(sa, "=")
		assert.Contains(t, setup, "--name "+name+" --type "+typ, "search attribute %s registered", sa)
	}

	w := f.Services["worker"]
	assert.Equal(t, "Dockerfile", w.Build["dockerfile"])
	assert.Equal(t, "temporal:7233", w.Environment["TEMPORAL_ADDRESS"])
	assert.Equal(t, "deployflow", w.Environment["DEPLOYFLOW_TASK_QUEUE"])
	assert.Equal(t, "0.0.0.0:9464", w.Environment["DEPLOYFLOW_METRICS_ADDRESS"], "metrics must be reachable from outside the container")
	assert.NotEmpty(t, w.Environment["KUBECONFIG"])
	assert.Contains(t, w.Ports, "9464:9464")

	df, err := os.ReadFile("Dockerfile")
	require.NoError(t, err, "the worker is built from Dockerfile")
	assert.Contains(t, string(df), "./worker")
	assert.Contains(t, string(df), "./starter")
}
