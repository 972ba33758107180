package manifest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

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
	// Strings YAML gives meaning to, in places that take any string.
	for _, w := range []string{"", " a", "yes", "null", "~", "1", "0x10", "- a", "a: b", "#", "&a", "*a", "!t", "%x", "'", "\"", "\\",
		"a\nb", "\t", "\r\n", "\u0085", "\u2028", "\ufeff", "é", "\U0001F600", "---", "...", "{", "[", "|", ">", "<<", "012", ".inf", "2001-12-14", "\x7f"} {
		m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Command: []string{w}, Env: map[string]string{"A": w}, PodAnnotations: map[string]string{"x": w}}}}
		raw, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, data) })
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
			if form.name == "YAML" && hasYAMLOnlyLineBreak(in) {
				// The YAML emitter turns U+0085, U+2028 and U+2029 (line
				// breaks to YAML, not to JSON) into spaces.
				continue
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

// hasYAMLOnlyLineBreak reports whether a string in m holds a character
// that YAML, but not JSON, takes for a line break.
func hasYAMLOnlyLineBreak(m *Manifest) bool {
	raw, err := json.Marshal(m) // escapes U+2028 and U+2029, not U+0085
	return err == nil && (bytes.Contains(raw, []byte("\u0085")) || bytes.Contains(raw, []byte(`\u2028`)) || bytes.Contains(raw, []byte(`\u2029`)))
}
