// Package crds holds deployflow's CustomResourceDefinitions (group
// deployflow.dev, version v1alpha1, all cluster-scoped) and installs them.
//
// The definitions are the *.yaml files beside this one, embedded in the
// binary. Install applies them with server-side apply through the dynamic
// client (no apiextensions client needed) and waits until the API server
// serves them; it is idempotent and safe to run from several processes at
// once.
package crds

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// The API group and version of every deployflow resource.
const (
	Group      = "deployflow.dev"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
)

// Kinds.
const (
	KindLease               = "Lease"
	KindHostnameReservation = "HostnameReservation"
	KindIPReservation       = "IPReservation"
)

// Labels put on reservations (and leases) so they can be listed by lease,
// owner or endpoint.
const (
	LabelLease    = "deployflow.dev/lease"
	LabelOwner    = "deployflow.dev/owner"
	LabelEndpoint = "deployflow.dev/endpoint"
)

// FieldManager is the field manager deployflow writes with.
const FieldManager = "deployflow"

// Resources of the custom resources, for the dynamic client.
var (
	Leases               = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "leases"}
	HostnameReservations = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "hostnamereservations"}
	IPReservations       = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "ipreservations"}
)

// crdResource is apiextensions.k8s.io/v1 CustomResourceDefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

//go:embed *.yaml
var files embed.FS

// Definitions returns the embedded CustomResourceDefinitions, sorted by name.
func Definitions() ([]*unstructured.Unstructured, error) { return DefinitionsIn(files) }

// DefinitionsIn returns the CustomResourceDefinitions of fsys's *.yaml
// files (another project's, such as the Gateway API's), sorted by name.
func DefinitionsIn(fsys fs.FS) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("crds: %s: %w", name, err)
			}
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			if u.GetKind() != "CustomResourceDefinition" || u.GetName() == "" {
				return nil, fmt.Errorf("crds: %s: want a named CustomResourceDefinition, got %s %q", name, u.GetKind(), u.GetName())
			}
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// establishTimeout bounds the wait for the API server to serve the CRDs when
// ctx has no earlier deadline.
const establishTimeout = 2 * time.Minute

// Install applies every CRD (server-side apply, forced, field manager
// FieldManager: creates what is missing, updates what differs, and leaves an
// identical CRD untouched) and waits until each is Established and its
// resource is served. It is idempotent, and concurrent calls (several test
// binaries, several workers starting at once) are safe.
func Install(ctx context.Context, dyn dynamic.Interface) error {
	defs, err := Definitions()
	if err != nil {
		return err
	}
	return InstallDefinitions(ctx, dyn, defs)
}

// InstallDefinitions is Install for defs.
func InstallDefinitions(ctx context.Context, dyn dynamic.Interface, defs []*unstructured.Unstructured) error {
	for _, def := range defs {
		if err := apply(ctx, dyn, def); err != nil {
			return err
		}
	}
	for _, def := range defs {
		if err := waitServed(ctx, dyn, def); err != nil {
			return err
		}
	}
	return nil
}

// applyBackoff retries an apply that lost a race with a concurrent one.
var applyBackoff = wait.Backoff{Steps: 8, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: 2 * time.Second}

func apply(ctx context.Context, dyn dynamic.Interface, def *unstructured.Unstructured) error {
	err := retry.OnError(applyBackoff, func(err error) bool {
		// Two applies creating the same CRD at once: the loser sees
		// AlreadyExists or a Conflict and simply applies again.
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err)
	}, func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := dyn.Resource(crdResource).Apply(ctx, def.GetName(), def.DeepCopy(), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		return err
	})
	if err != nil {
		return fmt.Errorf("crds: apply %s: %w", def.GetName(), err)
	}
	return nil
}

// waitServed waits until the CRD is Established with its names accepted and
// a List of its resource succeeds.
func waitServed(ctx context.Context, dyn dynamic.Interface, def *unstructured.Unstructured) error {
	gvr, err := storageResource(def)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdResource).Get(ctx, def.GetName(), metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if crd.GetDeletionTimestamp() != nil {
			return false, fmt.Errorf("crds: %s is being deleted", def.GetName())
		}
		established, namesAccepted := condition(crd, "Established"), condition(crd, "NamesAccepted")
		if namesAccepted.status == "False" {
			return false, fmt.Errorf("crds: %s: names not accepted: %s", def.GetName(), namesAccepted.message)
		}
		if established.status != "True" {
			last = fmt.Sprintf("not Established yet (%s)", established.message)
			return false, nil
		}
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			last = fmt.Sprintf("Established but %s not served yet: %v", gvr.Resource, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != "" {
			return fmt.Errorf("crds: waiting for %s: %w (last: %s)", def.GetName(), err, last)
		}
		return fmt.Errorf("crds: waiting for %s: %w", def.GetName(), err)
	}
	return nil
}

type cond struct{ status, message string }

func condition(crd *unstructured.Unstructured, typ string) cond {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		s, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		return cond{status: s, message: msg}
	}
	return cond{}
}

// storageResource is the resource a CRD serves at its storage version.
func storageResource(def *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	group, _, _ := unstructured.NestedString(def.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(def.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(def.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if storage, _ := m["storage"].(bool); storage {
			name, _ := m["name"].(string)
			return schema.GroupVersionResource{Group: group, Version: name, Resource: plural}, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("crds: %s has no storage version", def.GetName())
}

// Check reports whether the API server serves every deployflow resource,
// by discovery (no permission on CustomResourceDefinitions needed). The
// error names what is missing and how to install it.
func Check(disco discovery.DiscoveryInterface) error {
	want := []string{Leases.Resource, HostnameReservations.Resource, IPReservations.Resource}
	list, err := disco.ServerResourcesForGroupVersion(APIVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("crds: discover %s: %w", APIVersion, err)
	}
	served := map[string]bool{}
	if list != nil {
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
	}
	var missing []string
	for _, r := range want {
		if !served[r] {
			missing = append(missing, r+"."+Group)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the cluster does not serve deployflow's resources %v: install the CRDs with 'kubectl apply --server-side -f deploy/helm/deployflow/crds/' (helm install does it), or start the worker once with --install-crds", missing)
	}
	return nil
}
