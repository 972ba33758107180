package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Every manifest of the bad-manifest catalogue (internal/manifest/testdata/bad)
// deployed with the CLI: exit code 2, an error naming the field and the fix,
// and nothing written — no workflow started, no namespace created.
func TestDeployRefusesTheBadManifestCatalogueWritingNothing(t *testing.T) {
	env := testenv.Get(t)
	tq := testenv.Name(t, "tq")
	started := time.Now()
	dir := filepath.Join("..", "internal", "manifest", "testdata", "bad")
	idx, err := os.ReadFile(filepath.Join(dir, "catalogue.json"))
	require.NoError(t, err)
	var cases []struct{ File, Name, Path, Fragment string }
	require.NoError(t, json.Unmarshal(idx, &cases))
	require.GreaterOrEqual(t, len(cases), 30)

	for _, c := range cases {
		code, stdout, stderr := runCLI("deploy", "-f", filepath.Join(dir, c.File),
			"--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig())
		assert.Equal(t, 2, code, "%s: exit code", c.Name)
		assert.Empty(t, stdout, c.Name)
		assert.Contains(t, stderr, c.Fragment, c.Name)
		if c.Path != "" {
			assert.Contains(t, stderr, c.Path+": ", "%s: the error names the field", c.Name)
		}
		assert.Contains(t, stderr, "nothing was deployed", c.Name)
	}

	resp, err := env.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: `TaskQueue = "` + tq + `"`,
	})
	require.NoError(t, err)
	assert.Empty(t, resp.GetExecutions(), "no workflow was started")
	// The leases the catalogue names got no namespace.
	leaseRE := regexp.MustCompile(`"?lease"?:\s*"?([a-z0-9-]+)`)
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(dir, c.File))
		require.NoError(t, err)
		for _, m := range leaseRE.FindAllStringSubmatch(string(b), -1) {
			ns, err := env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(m[1]), metav1.GetOptions{})
			if err == nil {
				assert.True(t, ns.CreationTimestamp.Time.Before(started.Add(-time.Second)), "namespace %s was created", ns.Name)
			}
		}
	}
}
