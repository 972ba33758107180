package devstack

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runningStack is the local stack, which make test starts; the test
// fails without it on CI and is skipped elsewhere.
func runningStack(t *testing.T) *Stack {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("integration test: skipped with -short")
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	repo, err := FindRepo(wd)
	require.NoError(t, err)
	s, err := New(repo, nil)
	require.NoError(t, err)
	for _, c := range s.Status(context.Background()) {
		if !c.Running || c.Ready != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("local stack: %s is not running (CI=true: integration tests must run)", c.Name)
			}
			t.Skipf("local stack: %s is not running (make dev-up)", c.Name)
		}
	}
	return s
}

// Found in a run of make test: a placement test waited five minutes for
// pods that never ran. Its cluster's kwok had died at start (kwok's
// "concurrent map writes", kwok.go) while the cluster's nodes, Ready in
// etcd from an earlier start, said it was ready. A cluster whose kwok is
// gone is not ready, however its nodes read, and starting it again starts
// kwok again.
func TestAClusterWhoseKwokIsGoneIsNotReady(t *testing.T) {
	s := runningStack(t)
	ctx := context.Background()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	n, release, err := s.ReserveCluster(rctx)
	require.NoError(t, err)
	t.Cleanup(release)
	name := fmt.Sprintf("kwok-gone-%d", n)
	_, err = s.StartCluster(ctx, name, n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.StopCluster(name) })

	kwok := clusterProcess(Kwok, name)
	require.NoError(t, s.Stop(kwok))
	cs, err := clientsetOf(s.ClusterKubeconfig(name))
	require.NoError(t, err)
	require.NoError(t, s.clusterReady(ctx, cs), "the nodes still read Ready, from etcd")
	start := time.Now()
	err = s.bootstrap(ctx, cs, kwok)
	assert.ErrorIs(t, err, errKwokExited, "a cluster without its kwok is not ready")
	assert.Less(t, time.Since(start), 10*time.Second, "said at once, not at the minute's timeout")

	_, err = s.StartCluster(ctx, name, n)
	require.NoError(t, err, "a cluster started again starts its kwok again")
	_, ok := s.running(kwok)
	assert.True(t, ok, "kwok runs")
}
