package manifest

import (
	"reflect"
	"testing"
)

// Guards against a service field that WithDefaults does not copy (it
// builds each service field by field): podManagementPolicy was lost so,
// and every stateful service rendered OrderedReady whatever its manifest
// said. Every field set on a service must still be set after it.
func TestWithDefaultsKeepsEveryFieldOfAService(t *testing.T) {
	var s Service
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		fill(v.Field(i))
	}
	out := reflect.ValueOf(s.withDefaults())
	for i := range v.NumField() {
		if out.Field(i).IsZero() {
			t.Errorf("services[].%s is set and WithDefaults drops it: copy it in withDefaults", v.Type().Field(i).Name)
		}
	}
}

// fill sets f to a value that is not its zero.
func fill(f reflect.Value) {
	switch f.Kind() {
	case reflect.String:
		f.SetString("x")
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		f.SetInt(1)
	case reflect.Float64:
		f.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		fill(p.Elem())
		f.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(f.Type(), 1, 1)
		fill(s.Index(0))
		f.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(f.Type())
		k, e := reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		f.Set(m)
	case reflect.Struct:
		for i := range f.NumField() {
			if f.Type().Field(i).IsExported() {
				fill(f.Field(i))
			}
		}
	}
}
