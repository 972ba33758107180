// Package plan is a deploy as a tree of operations (the uncloud pattern):
// the plan computes the tree, `deploy --plan` prints it, the lease's
// workflow executes exactly its nodes, in order, and marks each one's state,
// and the lease's history keeps the executed tree. It is pure: no I/O.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Op is what a node does.
type Op string

// The operations of a deploy, in the order the deploy runs them.
const (
	OpDeploy          Op = "deploy"          // the root
	OpCheckLease      Op = "checkLease"      // the lease must be active
	OpApply           Op = "apply"           // the writes before the rollouts, as one step
	OpAllocateIP      Op = "allocateIP"      // a declared IP for a new endpoint
	OpReserveHostname Op = "reserveHostname" // exclusive across leases
	OpApplyObject     Op = "applyObject"     // a Service or the Ingress, server-side applied
	OpDeleteObject    Op = "deleteObject"    // what the manifest no longer declares
	OpRollOut         Op = "rollOut"         // one service's new template (a RolloutWorkflow)
	OpScale           Op = "scale"           // one service's replicas only (a RolloutWorkflow)
	OpCanaryStep      Op = "canaryStep"      // one of a canary rollout's steps
	OpBlueGreenStep   Op = "blueGreenStep"   // one of a blue-green rollout's steps
	OpBackground      Op = "background"      // a canary's background analysis, beside its steps
	OpRelease         Op = "release"         // what the manifest dropped, once healthy
	OpReleaseHostname Op = "releaseHostname"
	OpReleaseIP       Op = "releaseIP"
)

// State is how far a node got.
type State string

// A node's states. A plan's nodes are all Pending.
const (
	Pending State = "pending"
	Running State = "running"
	Done    State = "done"
	Failed  State = "failed"
	Skipped State = "skipped" // not run: the deploy ended before it, or it had nothing to do
)

// Node is one operation and the operations it is made of.
type Node struct {
	Op Op `json:"op"`
	// Target is what the node acts on (a hostname, an endpoint, an object
	// such as Service/web, a service's name); with Op it names the node.
	Target   string  `json:"target,omitempty"`
	Text     string  `json:"text"`
	State    State   `json:"state,omitempty"`
	Error    string  `json:"error,omitempty"`
	Children []*Node `json:"children,omitempty"`
}

// New is a pending node.
func New(op Op, target, text string, children ...*Node) *Node {
	return &Node{Op: op, Target: target, Text: text, State: Pending, Children: children}
}

// Add appends children that are not nil and returns n.
func (n *Node) Add(children ...*Node) *Node {
	for _, c := range children {
		if c != nil {
			n.Children = append(n.Children, c)
		}
	}
	return n
}

// Find is n's first child with op and target, or nil.
func (n *Node) Find(op Op, target string) *Node {
	for _, c := range n.Children {
		if c.Op == op && c.Target == target {
			return c
		}
	}
	return nil
}

// Search is the first node of n's tree (n included, depth first) with op
// and target, or nil.
func (n *Node) Search(op Op, target string) *Node {
	var found *Node
	n.Walk(func(x *Node, _ int) {
		if found == nil && x.Op == op && x.Target == target {
			found = x
		}
	})
	return found
}

// ByOp is n's children with op, in order.
func (n *Node) ByOp(op Op) []*Node {
	var out []*Node
	for _, c := range n.Children {
		if c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

// Mark sets n's state, and its error if err is not nil.
func (n *Node) Mark(s State, err error) {
	n.State = s
	if err != nil {
		n.Error = err.Error()
	}
}

// MarkAll sets the state of n and of every node under it still pending
// or running.
func (n *Node) MarkAll(s State) {
	n.Walk(func(x *Node, _ int) {
		if x.State == Pending || x.State == Running || x.State == "" {
			x.State = s
		}
	})
}

// Walk calls f on n and on every node under it, depth first, in order,
// with its depth (n is 0).
func (n *Node) Walk(f func(x *Node, depth int)) {
	var walk func(x *Node, depth int)
	walk = func(x *Node, depth int) {
		f(x, depth)
		for _, c := range x.Children {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
}

// Leaves are the texts of the nodes without children under n, in order:
// the deploy's operations as a list.
func (n *Node) Leaves() []string {
	var out []string
	n.Walk(func(x *Node, depth int) {
		if depth > 0 && len(x.Children) == 0 {
			out = append(out, x.Text)
		}
	})
	return out
}

// Clone is a deep copy of n.
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Children = nil
	for _, x := range n.Children {
		c.Children = append(c.Children, x.Clone())
	}
	return &c
}

// Fingerprint identifies the tree's operations (not their states): an
// approval of one tree is never an approval of another.
func (n *Node) Fingerprint() string {
	type shape struct {
		Op       Op      `json:"op"`
		Target   string  `json:"target,omitempty"`
		Text     string  `json:"text"`
		Children []shape `json:"children,omitempty"`
	}
	var conv func(x *Node) shape
	conv = func(x *Node) shape {
		s := shape{Op: x.Op, Target: x.Target, Text: x.Text}
		for _, c := range x.Children {
			s.Children = append(s.Children, conv(c))
		}
		return s
	}
	b, _ := json.Marshal(conv(n))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Format prints the tree, one node a line, with each node's state when
// withState:
//
//	deploy lease-a
//	├─ check lease lease-a is active            done
//	└─ roll out web: nginx:1.26 → nginx:1.27    running
//	   ├─ step 1/3: setWeight 10%               done
func (n *Node) Format(w io.Writer, withState bool) {
	var lines []string
	var states []string
	var walk func(x *Node, prefix, branch string)
	walk = func(x *Node, prefix, branch string) {
		lines = append(lines, prefix+branch+x.Text)
		st := string(x.State)
		if x.Error != "" {
			st += ": " + x.Error
		}
		states = append(states, st)
		child := prefix
		switch branch {
		case "├─ ":
			child += "│  "
		case "└─ ":
			child += "   "
		}
		for i, c := range x.Children {
			b := "├─ "
			if i == len(x.Children)-1 {
				b = "└─ "
			}
			walk(c, child, b)
		}
	}
	walk(n, "", "")
	width := 0
	for _, l := range lines {
		width = max(width, len([]rune(l)))
	}
	for i, l := range lines {
		if !withState {
			fmt.Fprintln(w, l)
			continue
		}
		fmt.Fprintf(w, "%s%s  %s\n", l, strings.Repeat(" ", width-len([]rune(l))), states[i])
	}
}

// String is the tree without states.
func (n *Node) String() string {
	var b strings.Builder
	n.Format(&b, false)
	return b.String()
}

// The operations of a placement (issue 23.4): its waves in order, each
// the deploys to its clusters, in parallel, then its gate.
const (
	OpPlacement     Op = "placement"     // the root
	OpWave          Op = "wave"          // one wave; target "wave N"
	OpDeployCluster Op = "deployCluster" // the lease's deploy to one cluster; target its name
	OpPause         Op = "pause"         // a wave's pause; target "wave N"
	OpAnalysis      Op = "analysis"      // a wave's analysis; target "wave N"
	OpApproval      Op = "approval"      // a wave's wait for an operator's promote; target "wave N"
	OpRevert        Op = "revert"        // a cluster back to its last-known-good manifest; target its name
)
