package plan

import (
	"fmt"
	"strconv"
)

// A deploy's tree, built here from what the plan read, with no I/O. Each
// node is named by its operation and target: the lease's workflow finds
// the node of what it ran by them (never by its text, which is for people
// and may be reworded), and the plan's fingerprint covers both.

// Deploy is what one deploy of a lease will do, as its plan read it.
type Deploy struct {
	Lease     string
	Namespace string
	// The writes before the rollouts, in this order.
	AllocateIPs, ReserveHostnames, Objects, Prune []string
	// Services are the changed services, in the order they roll out.
	Services []ServiceChange
	// What the manifest no longer declares, released once healthy.
	ReleaseHostnames, ReleaseIPs []string
}

// Tree is the deploy as the tree of operations the lease's workflow
// executes in this order: check the lease; the writes before the rollouts
// (one step: IPs, hostnames, namespace, Services, Ingress); each changed
// service's rollout, in parallel, with a canary's or blue-green's steps
// under it; and, once healthy, the release of what the manifest dropped.
func (d Deploy) Tree() *Node {
	root := New(OpDeploy, d.Lease, "deploy lease "+d.Lease)
	root.Add(New(OpCheckLease, d.Lease, "check that lease "+d.Lease+" is active"))
	apply := New(OpApply, d.Namespace, "reserve and apply, in namespace "+d.Namespace)
	apply.Add(d.ApplyOps()...)
	root.Add(apply)
	for _, c := range d.Services {
		root.Add(Service(c))
	}
	release := New(OpRelease, d.Lease, "release what the manifest no longer declares, once healthy")
	return root.Add(release.Add(d.ReleaseOps()...))
}

// ApplyOps are the apply step's operations, in order.
func (d Deploy) ApplyOps() []*Node {
	var ops []*Node
	for _, e := range d.AllocateIPs {
		ops = append(ops, AllocateIP(e))
	}
	for _, h := range d.ReserveHostnames {
		ops = append(ops, ReserveHostname(h))
	}
	for _, o := range d.Objects {
		ops = append(ops, ApplyObject(o))
	}
	for _, o := range d.Prune {
		ops = append(ops, DeleteObject(o))
	}
	return ops
}

// ReleaseOps are the release step's operations, in order.
func (d Deploy) ReleaseOps() []*Node {
	var ops []*Node
	for _, h := range d.ReleaseHostnames {
		ops = append(ops, ReleaseHostname(h))
	}
	for _, e := range d.ReleaseIPs {
		ops = append(ops, ReleaseIP(e))
	}
	return ops
}

// The leaf operations of a deploy: their words are here, once, so the
// plan, the executed tree and the lease's history say the same.

// AllocateIP is a declared IP for a new endpoint.
func AllocateIP(endpoint string) *Node {
	return New(OpAllocateIP, endpoint, "allocate an IP for endpoint "+endpoint)
}

// ReserveHostname is a hostname reserved for the lease.
func ReserveHostname(h string) *Node { return New(OpReserveHostname, h, "reserve hostname "+h) }

// ApplyObject is a Service or the Ingress (Kind/name), server-side applied.
func ApplyObject(object string) *Node { return New(OpApplyObject, object, "apply "+object) }

// DeleteObject is an object the manifest no longer declares.
func DeleteObject(object string) *Node { return New(OpDeleteObject, object, "delete "+object) }

// ReleaseHostname is a hostname the manifest dropped.
func ReleaseHostname(h string) *Node { return New(OpReleaseHostname, h, "release hostname "+h) }

// ReleaseIP is the IP of an endpoint the manifest dropped.
func ReleaseIP(endpoint string) *Node {
	return New(OpReleaseIP, endpoint, "release the IP of endpoint "+endpoint)
}

// ServiceChange is one service's change as the plan classified it: a
// scale or a rollout.
type ServiceChange struct {
	Service string
	// Scale: its replicas only; otherwise a new template rolls out.
	Scale                            bool
	CurrentImage, DesiredImage       string // CurrentImage "": nothing runs yet
	CurrentReplicas, DesiredReplicas int32
	// BlueGreenSteps, or CanarySteps with Background (a canary's
	// background analysis), as the manifest words them: the steps the
	// rollout takes from the running version (none on a first deploy).
	BlueGreenSteps []string
	CanarySteps    []string
	Background     string
}

// Text is the change in words.
func (c ServiceChange) Text() string {
	switch {
	case c.Scale:
		return fmt.Sprintf("scale %s: %d → %d replicas", c.Service, c.CurrentReplicas, c.DesiredReplicas)
	case c.CurrentImage == "":
		return fmt.Sprintf("roll out %s: %s, %d replicas", c.Service, c.DesiredImage, c.DesiredReplicas)
	}
	return fmt.Sprintf("roll out %s: %s → %s, %d → %d replicas", c.Service, c.CurrentImage, c.DesiredImage, c.CurrentReplicas, c.DesiredReplicas)
}

// Service is what the deploy does to one service: a scale, or a rollout
// with a blue-green's or a canary's steps under it.
func Service(c ServiceChange) *Node {
	if c.Scale {
		return New(OpScale, c.Service, c.Text())
	}
	n := New(OpRollOut, c.Service, c.Text())
	switch {
	case len(c.BlueGreenSteps) > 0:
		n.Text += " (blue-green)"
		for i, step := range c.BlueGreenSteps {
			n.Add(New(OpBlueGreenStep, strconv.Itoa(i+1), fmt.Sprintf("step %d/%d: %s", i+1, len(c.BlueGreenSteps), step)))
		}
	case len(c.CanarySteps) > 0:
		n.Text += fmt.Sprintf(" (canary, %d steps)", len(c.CanarySteps))
		if c.Background != "" {
			n.Add(New(OpBackground, c.Service, "background "+c.Background+", while the steps run"))
		}
		for i, step := range c.CanarySteps {
			n.Add(New(OpCanaryStep, strconv.Itoa(i+1), fmt.Sprintf("step %d/%d: %s", i+1, len(c.CanarySteps), step)))
		}
	}
	return n
}
