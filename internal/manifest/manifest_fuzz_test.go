package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// FuzzParse: Parse never panics, and whatever it accepts validates, defaults
// idempotently, converts without error and survives a JSON (the workflow
// input) and a YAML round trip unchanged once defaulted.
func FuzzParse(f *testing.F) {
	f.Add([]byte(happyYAML))
	f.Add([]byte(happyJSON))
	for _, v := range goodVariants {
		f.Add([]byte(v.in))
	}
	for _, c := range badCases {
		if len(c.in) < 4096 {
			f.Add([]byte(c.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		defer func() {
			if el := time.Since(start); el > 300*time.Millisecond {
				os.WriteFile(fmt.Sprintf("/tmp/slow-%d-%d", el.Milliseconds(), len(data)), data, 0o644)
			}
		}()
		checkParse(t, data)
	})
}

// checkParse is FuzzParse's property for one input.
func checkParse(t testing.TB, data []byte) {
	m, err := Parse(data)
	if err != nil {
		if m != nil {
			t.Fatalf("Parse returned a manifest with error %v", err)
		}
		if err.Error() == "" {
			t.Fatal("empty error message")
		}
		return
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Parse accepted a manifest that does not validate: %v", err)
	}
	d := m.WithDefaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("the defaulted manifest does not validate: %v", err)
	}
	if dd := d.WithDefaults(); !reflect.DeepEqual(d, dd) {
		t.Fatalf("WithDefaults is not idempotent:\n%#v\n%#v", d, dd)
	}

	for _, form := range []struct {
		name    string
		marshal func(any) ([]byte, error)
	}{{"JSON", json.Marshal}, {"YAML", yaml.Marshal}} {
		for _, in := range []*Manifest{m, d} {
			raw, err := form.marshal(in)
			if err != nil {
				if form.name == "YAML" {
					continue // the YAML emitter refuses some characters JSON allows, like U+0080
				}
				t.Fatalf("%s marshal: %v", form.name, err)
			}
			back, err := Parse(raw)
			if err != nil {
				t.Fatalf("%s round trip: Parse(%s): %v", form.name, raw, err)
			}
			if got := back.WithDefaults(); !reflect.DeepEqual(d, got) {
				t.Fatalf("%s round trip changed the manifest:\n%s\nwant %#v\ngot  %#v", form.name, raw, d, got)
			}
		}
	}

	// Conversion works on anything valid, and is deterministic.
	for _, name := range m.ServiceNames() {
		dep, err := m.Deployment(name)
		if err != nil {
			t.Fatalf("Deployment(%q): %v", name, err)
		}
		again, _ := d.Deployment(name)
		if !reflect.DeepEqual(dep, again) {
			t.Fatalf("Deployment(%q) differs between the manifest and its defaults", name)
		}
	}
	_ = m.ClusterIPServices()
	_ = m.Ingress()
	ips := map[string]string{}
	for _, e := range m.IPEndpoints() {
		ips[e] = "192.0.2.1"
	}
	if _, err := m.LoadBalancerServices(ips); err != nil {
		t.Fatalf("LoadBalancerServices: %v", err)
	}
}
