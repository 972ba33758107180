package activities

import (
	"net/http"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/reserve"
)

type fakeProm struct{ PrometheusAPI }

// Guards OnCluster against a field added to Activities and forgotten
// there: a cluster's activities would silently run without it (a limit
// left unset is the default, not the operator's). Every exported field is
// either the cluster's own or a's.
func TestOnClusterKeepsEveryOtherSetting(t *testing.T) {
	// Gateway is the cluster's own (its client writes there), to a
	// Gateway of the same name: checked below.
	own := map[string]bool{"Kube": true, "Hostnames": true, "IPs": true, "Observer": true, "LeasesElsewhere": true, "Gateway": true}
	a := &Activities{
		Leases:                   lease.NewKubeStore(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())),
		Metrics:                  &metrics.Metrics{},
		RolloutNamespaces:        []string{"shared"},
		Prometheus:               fakeProm{},
		PrometheusLabel:          "ns",
		HTTPCheckAllow:           []string{"*.example.com"},
		ClusterDomain:            "example.local",
		Notifier:                 &Notifier{URL: "https://hooks.example.com", Client: http.DefaultClient},
		Limits:                   manifest.Limits{Services: 3},
		ReservedPrefixes:         []string{"example.com/"},
		AllowedPodKeys:           []string{"example.com/ok"},
		Namespace:                config.NamespaceProfile{PodSecurity: "restricted"},
		MountServiceAccountToken: true,
	}
	kube, dyn := fake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	c := OnCluster(a, kube, dyn, &reserve.Hostnames{}, &reserve.IPs{})
	v, cv := reflect.ValueOf(a).Elem(), reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || own[f.Name] {
			continue
		}
		if v.Field(i).IsZero() {
			t.Fatalf("Activities.%s: set it in this test's a, and copy it in OnCluster", f.Name)
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), cv.Field(i).Interface()) {
			t.Errorf("OnCluster drops %s: copy it from a", f.Name)
		}
	}
	if !c.LeasesElsewhere {
		t.Errorf("a cluster's lease namespaces must not be owned by a lease record of another cluster")
	}
	if c.Kube != kube || c.Observer != nil {
		t.Errorf("the cluster's activities use its own client and observer")
	}
	if c.Gateway != nil {
		t.Errorf("a worker that routes through Ingresses routes its clusters' leases through theirs")
	}

	// Guards --routing gateway on the other clusters (before, their
	// leases got an Ingress): the same Gateway, by name, in the cluster,
	// written through the cluster's own client.
	a.Gateway = &GatewayRouting{Ref: manifest.GatewayRef{Namespace: "gw", Name: "public", Section: "http"}, Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), AcceptTimeout: 7}
	c = OnCluster(a, kube, dyn, &reserve.Hostnames{}, &reserve.IPs{})
	if c.Gateway == nil || c.Gateway.Ref != a.Gateway.Ref || c.Gateway.Dynamic != dyn || c.Gateway.AcceptTimeout != 7 {
		t.Errorf("a cluster's leases route through the Gateway of the same name there, written with its client: %+v", c.Gateway)
	}
}
