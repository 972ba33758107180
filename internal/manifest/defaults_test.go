package manifest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestWithDefaultsFillsEveryDefault(t *testing.T) {
	m := &Manifest{Lease: "shop", Services: []Service{{
		Name:  "web",
		Image: "nginx",
		Ports: []Port{{Port: 80}, {Port: 53, TargetPort: 5353, Protocol: "UDP"}},
	}}}
	d := m.WithDefaults()
	s := d.Services[0]
	assert.Equal(t, int32(1), *s.Replicas)
	assert.Equal(t, []Port{{Port: 80, TargetPort: 80, Protocol: "TCP"}, {Port: 53, TargetPort: 5353, Protocol: "UDP"}}, s.Ports)
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	assert.Equal(t, &Rollout{
		Strategy:                "RollingUpdate",
		MaxSurge:                &surge,
		MaxUnavailable:          &unavail,
		ProgressDeadlineSeconds: ptr[int32](600),
		RevisionHistoryLimit:    ptr[int32](10),
		AutoRollback:            ptr(true),
	}, s.Rollout)
	require.NoError(t, d.Validate())
}

func TestWithDefaultsKeepsWhatIsSet(t *testing.T) {
	d := happyManifest().WithDefaults()
	web, dns := d.Services[0], d.Services[1]
	assert.Equal(t, int32(3), *web.Replicas)
	assert.Equal(t, intstr.FromInt32(2), *web.Rollout.MaxSurge)
	assert.Equal(t, intstr.FromString("10%"), *web.Rollout.MaxUnavailable)
	assert.Equal(t, int32(5), web.Rollout.MinReadySeconds)
	assert.Equal(t, int32(8080), web.Ports[0].TargetPort)

	// Recreate gets no rolling-update parameters, and keeps its own values.
	assert.Equal(t, &Rollout{
		Strategy:                "Recreate",
		ProgressDeadlineSeconds: ptr[int32](120),
		RevisionHistoryLimit:    ptr[int32](3),
		AutoRollback:            ptr(false),
	}, dns.Rollout)
	assert.Equal(t, []Port{
		{Port: 53, TargetPort: 53, Protocol: "UDP", Expose: &Expose{IP: "edge"}},
		{Port: 9153, TargetPort: 9153, Protocol: "TCP"},
	}, dns.Ports)
	require.NoError(t, d.Validate())
}

func TestWithDefaultsIsADeepCopy(t *testing.T) {
	m := happyManifest()
	d := m.WithDefaults()
	*d.Services[0].Replicas = 99
	d.Services[0].Env["NEW"] = "x"
	d.Services[0].Command[0] = "changed"
	d.Services[0].Ports[0].Expose.HTTP.Hostnames[0] = "changed.example.com"
	*d.Services[0].Rollout.MaxSurge = intstr.FromInt32(7)
	*d.Services[1].Rollout.AutoRollback = true
	d.Services[0].PodLabels["x"] = "y"
	assert.Equal(t, happyManifest(), m)
}

func TestWithDefaultsIsIdempotentAndNormalizesEmpties(t *testing.T) {
	for name, m := range map[string]*Manifest{
		"happy":   happyManifest(),
		"minimal": {Lease: "a", Services: []Service{{Name: "web", Image: "nginx"}}},
		"empties": {Lease: "a", Services: []Service{{
			Name: "web", Image: "nginx",
			Command: []string{}, Args: []string{}, Env: map[string]string{}, Ports: []Port{},
			PodLabels: map[string]string{}, PodAnnotations: map[string]string{},
			Resources: &Resources{}, Rollout: &Rollout{},
		}}},
	} {
		t.Run(name, func(t *testing.T) {
			d := m.WithDefaults()
			assert.Equal(t, d, d.WithDefaults())
			// What JSON drops (empty lists and maps, empty resources) is
			// already gone, so the defaulted manifest survives a round trip.
			raw, err := json.Marshal(d)
			require.NoError(t, err)
			var back Manifest
			require.NoError(t, json.Unmarshal(raw, &back))
			assert.Equal(t, d, &back)
		})
	}
}

func TestWithDefaultsOfNil(t *testing.T) {
	var m *Manifest
	assert.Nil(t, m.WithDefaults())
}

// HasDefaults is what lets a deploy fill its defaults once: the steps after
// the chain's start convert the manifest as it is when HasDefaults says the
// defaults are there. This guards that it never says so of a manifest that
// lacks one: each default, cleared in turn, makes it false; and a manifest
// it accepts converts to the same objects as its WithDefaults.
func TestHasDefaultsMissesNoDefault(t *testing.T) {
	d := happyManifest().WithDefaults()
	assert.False(t, happyManifest().HasDefaults(), "the manifest as written")
	assert.True(t, d.HasDefaults())
	for name, clear := range map[string]func(m *Manifest){
		"replicas":                func(m *Manifest) { m.Services[0].Replicas = nil },
		"rollout":                 func(m *Manifest) { m.Services[0].Rollout = nil },
		"strategy":                func(m *Manifest) { m.Services[0].Rollout.Strategy = "" },
		"maxSurge":                func(m *Manifest) { m.Services[0].Rollout.MaxSurge = nil },
		"maxUnavailable":          func(m *Manifest) { m.Services[0].Rollout.MaxUnavailable = nil },
		"progressDeadlineSeconds": func(m *Manifest) { m.Services[0].Rollout.ProgressDeadlineSeconds = nil },
		"revisionHistoryLimit":    func(m *Manifest) { m.Services[0].Rollout.RevisionHistoryLimit = nil },
		"autoRollback":            func(m *Manifest) { m.Services[0].Rollout.AutoRollback = nil },
		"targetPort":              func(m *Manifest) { m.Services[0].Ports[0].TargetPort = 0 },
		"protocol":                func(m *Manifest) { m.Services[0].Ports[0].Protocol = "" },
	} {
		m := happyManifest().WithDefaults()
		require.NotEmpty(t, m.Services[0].Ports)
		clear(m)
		assert.False(t, m.HasDefaults(), "without %s", name)
		// The conversions fill it in on the way.
		assert.Equal(t, m.WithDefaults().ClusterIPServices(), m.ClusterIPServices(), "without %s", name)
	}
	assert.Equal(t, happyManifest().ClusterIPServices(), d.ClusterIPServices())
	assert.Equal(t, happyManifest().Ingress(), d.Ingress())
}
