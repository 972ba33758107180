package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sample() *Node {
	return New(OpDeploy, "a", "deploy lease a",
		New(OpCheckLease, "a", "check that lease a is active"),
		New(OpApply, "ns", "reserve and apply",
			New(OpReserveHostname, "a.example.com", "reserve hostname a.example.com"),
			New(OpApplyObject, "Service/web", "apply Service/web")),
		New(OpRollOut, "web", "roll out web (canary, 2 steps)",
			New(OpCanaryStep, "1", "step 1/2: setWeight 50%"),
			New(OpCanaryStep, "2", "step 2/2: pause 1s")),
		New(OpRelease, "a", "release"))
}

func TestFormat(t *testing.T) {
	n := sample()
	assert.Equal(t, strings.Join([]string{
		"deploy lease a",
		"├─ check that lease a is active",
		"├─ reserve and apply",
		"│  ├─ reserve hostname a.example.com",
		"│  └─ apply Service/web",
		"├─ roll out web (canary, 2 steps)",
		"│  ├─ step 1/2: setWeight 50%",
		"│  └─ step 2/2: pause 1s",
		"└─ release",
		"",
	}, "\n"), n.String())

	n.Children[0].Mark(Done, nil)
	n.Children[2].Mark(Failed, errors.New("canary aborted"))
	var b strings.Builder
	n.Format(&b, true)
	lines := strings.Split(b.String(), "\n")
	assert.Equal(t, "deploy lease a                        pending", lines[0], "states line up in one column")
	assert.Equal(t, "├─ check that lease a is active       done", lines[1])
	assert.Equal(t, "│  ├─ reserve hostname a.example.com  pending", lines[3], "the widest line sets the column")
	assert.Equal(t, "├─ roll out web (canary, 2 steps)     failed: canary aborted", lines[5])
}

func TestMarkAllSkipsOnlyWhatDidNotEnd(t *testing.T) {
	n := sample()
	n.Children[0].Mark(Done, nil)
	n.Children[2].Mark(Running, nil)
	n.Children[2].Children[0].Mark(Failed, errors.New("x"))
	n.MarkAll(Skipped)
	var states []State
	n.Walk(func(x *Node, _ int) { states = append(states, x.State) })
	assert.Equal(t, []State{Skipped, Done, Skipped, Skipped, Skipped, Skipped, Failed, Skipped, Skipped}, states)
}

func TestFingerprintIsTheOperationsNotTheirStates(t *testing.T) {
	a, b := sample(), sample()
	assert.Equal(t, a.Fingerprint(), b.Fingerprint())
	b.MarkAll(Done)
	assert.Equal(t, a.Fingerprint(), b.Fingerprint(), "executing a tree does not change what was approved")
	b.Children[2].Children[1].Text = "step 2/2: pause 2s"
	assert.NotEqual(t, a.Fingerprint(), b.Fingerprint(), "another step is another plan")
	c := sample()
	c.Children[1].Children[0].Target = "b.example.com"
	assert.NotEqual(t, a.Fingerprint(), c.Fingerprint())
}

func TestLeavesAreTheOperationsInOrder(t *testing.T) {
	assert.Equal(t, []string{
		"check that lease a is active", "reserve hostname a.example.com", "apply Service/web",
		"step 1/2: setWeight 50%", "step 2/2: pause 1s", "release",
	}, sample().Leaves())
}

func TestCloneIsDeep(t *testing.T) {
	a := sample()
	b := a.Clone()
	b.Children[2].Children[0].Mark(Done, nil)
	assert.Equal(t, Pending, a.Children[2].Children[0].State)
	assert.Equal(t, a.String(), b.String())
	assert.Nil(t, (*Node)(nil).Clone())
}

func TestFindAndByOp(t *testing.T) {
	n := sample()
	assert.Equal(t, "roll out web (canary, 2 steps)", n.Find(OpRollOut, "web").Text)
	assert.Nil(t, n.Find(OpRollOut, "api"))
	assert.Len(t, n.Find(OpRollOut, "web").ByOp(OpCanaryStep), 2)
	n.Add(nil)
	assert.Len(t, n.Children, 4, "Add skips nil")
}
