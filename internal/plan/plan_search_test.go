package plan

import "testing"

// Search finds a node anywhere in the tree (Find looks at children only):
// a placement marks its clusters' deploys, two levels down.
func TestSearchFindsNestedNodes(t *testing.T) {
	root := New(OpPlacement, "shop", "place",
		New(OpWave, "wave 1", "wave 1", New(OpDeployCluster, "local", "deploy to cluster local")),
		New(OpWave, "wave 2", "wave 2", New(OpDeployCluster, "eu-1", "deploy to cluster eu-1"), New(OpPause, "wave 2", "pause")))
	for _, c := range []struct {
		op     Op
		target string
		want   string
	}{
		{OpDeployCluster, "eu-1", "deploy to cluster eu-1"},
		{OpPause, "wave 2", "pause"},
		{OpWave, "wave 1", "wave 1"},
		{OpPlacement, "shop", "place"},
		{OpDeployCluster, "us-1", ""},
	} {
		got := root.Search(c.op, c.target)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("Search(%s, %s) = %q, want none", c.op, c.target, got.Text)
		case c.want != "" && (got == nil || got.Text != c.want):
			t.Errorf("Search(%s, %s) = %v, want %q", c.op, c.target, got, c.want)
		}
	}
	if root.Find(OpDeployCluster, "eu-1") != nil {
		t.Errorf("Find looks at children only")
	}
}
