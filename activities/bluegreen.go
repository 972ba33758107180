package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Where a blue-green touches the cluster (issue 12.4): its Services'
// selectors. The rollout decides which version each selects
// (workflows/rollout/bluegreen.go); the ReplicaSets scale as every
// rollout's do (ApplyPlan).

// PinInput pins a blue-green service's Services to versions, by
// pod-template-hash: the active ones (the service's Service and its
// LoadBalancer Services) to Active, the preview to Preview. An empty hash
// leaves those Services as they are.
type PinInput struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Active    string `json:"active,omitempty"`
	Preview   string `json:"preview,omitempty"`
	// Stable and Canary pin a traffic-routed canary's stable and canary
	// Services (manifest.TrafficServices).
	Stable string `json:"stable,omitempty"`
	Canary string `json:"canary,omitempty"`
	// Unpin removes the pin: the Services select every pod of the service
	// (a rolling update of a blue-green service with nothing to switch
	// from).
	Unpin bool `json:"unpin,omitempty"`
}

// PinResult is what PinServices found (the versions the active and the
// preview Services selected before) and changed ("Service/web → 5d4f…").
type PinResult struct {
	Active  string   `json:"active,omitempty"`
	Preview string   `json:"preview,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

// PinServices sets the pod-template-hash in the selector of the service's
// Services by role (manifest.RoleLabel). It is idempotent: a Service that
// already selects its version is left alone.
func (a *Activities) PinServices(ctx context.Context, in PinInput) (*PinResult, error) {
	list, err := a.Kube.CoreV1().Services(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ServiceLabel + "=" + in.Service + "," + manifest.RoleLabel})
	if err != nil {
		return nil, fmt.Errorf("list services of %s/%s: %w", in.Namespace, in.Service, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	out := &PinResult{}
	for _, s := range list.Items {
		have := s.Spec.Selector[manifest.PodTemplateHashLabel]
		want := in.Active
		switch s.Labels[manifest.RoleLabel] {
		case manifest.RolePreview:
			want = in.Preview
			if out.Preview == "" {
				out.Preview = have
			}
		case manifest.RoleStable:
			want = in.Stable
		case manifest.RoleCanary:
			want = in.Canary
		default:
			if s.Name == in.Service {
				out.Active = have
			}
		}
		var value any = want
		switch {
		case in.Unpin && have != "":
			value = nil // a JSON merge patch's null removes the key
		case in.Unpin, want == "", have == want:
			continue
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"selector": map[string]any{manifest.PodTemplateHashLabel: value}}})
		if _, err := a.Kube.CoreV1().Services(in.Namespace).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager + "-rollout"}); err != nil {
			return nil, fmt.Errorf("pin service %s/%s to %s: %w", in.Namespace, s.Name, want, err)
		}
		if value == nil {
			want = "every version"
		}
		out.Changed = append(out.Changed, fmt.Sprintf("Service/%s → %s", s.Name, want))
	}
	return out, nil
}
