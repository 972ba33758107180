package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// A cluster's pods are run by kwok: its fake nodes, registered here, and
// the stages of k8s/kwok/stages.yaml. A cluster is ready when kwok has run
// a pod since it started, not when its nodes read Ready: their status stays
// in etcd across a restart, so a kwok that died at start left a cluster
// whose nodes read Ready and whose pods never ran (a placement test waited
// five minutes for them). kwok v0.8.0 does die at start, now and then:
// "fatal error: concurrent map writes" in its CEL type registry (easycel's
// unsynchronised map, written as the node and pod stages first compile
// side by side, which a restart with pods already on the nodes makes
// likely). Each process compiles its stages once, so a kwok that ran a pod
// is past it; one that died is started again.

// FakeNodes are the kwok nodes the cluster schedules onto; the last,
// GPUNode, advertises GPUs.
var FakeNodes = []string{"kwok-node-0", "kwok-node-1", GPUNode}

// GPUNode is the fake node with GPUs (issue 37.2): GPUNodeUnits of
// GPUNodeResource, labelled with GPUNodeModel as a provider labels its GPU
// nodes, and tainted with the resource's name as GPU nodes commonly are,
// so that only pods asking for GPUs run there.
const (
	GPUNode         = "kwok-gpu-node-0"
	GPUNodeResource = "nvidia.com/gpu"
	GPUNodeModel    = "a100"
	GPUNodeUnits    = 8
	// GPUModelLabel is manifest.GPUModelLabel (a lower layer cannot
	// import it; the live GPU test schedules by it).
	GPUModelLabel = "deployflow.dev/gpu-model"
	// GPUModels is what the local stack's workers offer (--gpu-models):
	// the node's model, and one no node has.
	GPUModels = "nvidia/" + GPUNodeModel + ",nvidia/h100"
)

// kwokStarts is how many times a cluster's kwok is started before a crash
// at start-up is reported.
const kwokStarts = 3

// errKwokExited: the cluster's kwok process is gone.
var errKwokExited = errors.New("kwok exited")

// bootstrapWithKwok is bootstrap, with kwok started again, under lock,
// each time it died at start-up. The caller does not hold lock.
func (s *Stack) bootstrapWithKwok(ctx context.Context, cs kubernetes.Interface, kwok component, lock func() (func(), error)) error {
	for attempt := 1; ; attempt++ {
		err := s.bootstrap(ctx, cs, kwok.name)
		if !errors.Is(err, errKwokExited) || attempt == kwokStarts {
			return err
		}
		s.Logf("%-24s exited at start-up (%v): starting it again", kwok.name, err)
		unlock, err := lock()
		if err != nil {
			return err
		}
		_, err = s.upComponent(ctx, kwok)
		unlock()
		if err != nil {
			return err
		}
	}
}

// bootstrap creates the stack's StorageClass and registers the kwok nodes
// of a cluster (kwok is the process that manages them) and waits until it
// runs pods: the nodes are Ready, the default ServiceAccount exists, and a
// probe pod turned Ready. It returns errKwokExited if kwok is gone
// meanwhile.
func (s *Stack) bootstrap(ctx context.Context, cs kubernetes.Interface, kwok string) error {
	if err := ensureStorageClass(ctx, cs); err != nil {
		return err
	}
	for _, name := range FakeNodes {
		want := fakeNode(name)
		_, err := cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = keepCapacity(ctx, cs, want)
		}
		if err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	probe := ""
	defer func() {
		if probe != "" {
			_ = cs.CoreV1().Pods("default").Delete(context.Background(), probe, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		}
	}()
	for {
		if _, ok := s.running(kwok); !ok {
			return fmt.Errorf("%w; end of %s:\n%s", errKwokExited, s.logFile(kwok), s.tail(kwok, 2000))
		}
		err := s.clusterReady(ctx, cs)
		if err == nil && probe == "" {
			probe, err = createProbePod(ctx, cs)
		}
		if err == nil {
			err = podReady(ctx, cs, probe)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %v; end of %s:\n%s", err, s.logFile(kwok), s.tail(kwok, 2000))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// keepCapacity gives a node registered by an earlier stack the capacity
// its fake node has now (a resource added since: ephemeral storage, GPUs;
// or grown: pods, for make bench-scale's 20,000 leases).
func keepCapacity(ctx context.Context, cs kubernetes.Interface, want *corev1.Node) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	changed := false
	for r, q := range want.Status.Capacity {
		if have, ok := n.Status.Capacity[r]; !ok || have.Cmp(q) != 0 {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	n.Status.Capacity, n.Status.Allocatable = want.Status.Capacity, want.Status.Allocatable
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

func fakeNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		// Two nodes take make bench-scale's 20,000 one-pod leases and
		// more (at 10,000 each, its last leases' pods stayed Pending).
		corev1.ResourcePods: resource.MustParse("30000"),
		// Node disk, as a kubelet reports it: pods asking for ephemeral
		// storage schedule (before, none could: CI found it deploying
		// examples/app.yaml).
		corev1.ResourceEphemeralStorage: resource.MustParse("10Ti"),
	}
	labels := map[string]string{
		"type":                   "kwok",
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	var taints []corev1.Taint
	if name == GPUNode {
		capacity[GPUNodeResource] = *resource.NewQuantity(GPUNodeUnits, resource.DecimalSI)
		labels[GPUModelLabel] = GPUNodeModel
		taints = []corev1.Taint{{Key: GPUNodeResource, Effect: corev1.TaintEffectNoSchedule}}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      labels,
		},
		Spec:   corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity},
	}
}

func (s *Stack) clusterReady(ctx context.Context, cs kubernetes.Interface) error {
	for _, name := range FakeNodes {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready yet", name)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("default ServiceAccount: %w", err)
	}
	return nil
}

// createProbePod creates a pod on the first fake node (bound there: no
// scheduler involved), named uniquely: test binaries bootstrap side by side.
func createProbePod(ctx context.Context, cs kubernetes.Interface) (string, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "devstack-probe-" + hex.EncodeToString(b), Labels: map[string]string{"app.kubernetes.io/managed-by": "devstack"}},
		Spec: corev1.PodSpec{
			NodeName:                     FakeNodes[0],
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("probe pod: %w", err)
	}
	return pod.Name, nil
}

func podReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("probe pod: %w", err)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("probe pod %s is not Ready yet (kwok has not run it)", name)
}
