package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Parse reads a manifest from YAML or JSON, strictly, and validates it.
//
// Input that starts with '{' is read as JSON, anything else as YAML (one
// document). Unknown fields, values of the wrong type and duplicate keys are
// errors, reported with their path and, for a misspelt or misplaced field,
// the field that was probably meant. All such problems, and then all of
// Validate's, come back together as a *ValidationError; input that is empty,
// not YAML or JSON at all, more than one document or not a mapping gives a
// plain error.
//
// The manifest is returned as written; WithDefaults fills in the defaults.
func Parse(data []byte) (*Manifest, error) { return parse(data, false) }

// ParseLenient is Parse as manifests were parsed before issue 20's
// stricter rules (1 MiB; any expr condition; any PromQL query): for what a
// lease's workflow carries from an earlier run, which was accepted under
// the rules of its day. Containment holds at measurement: a condition or a
// query the stricter rules refuse is not judged, not run (inconclusive).
func ParseLenient(data []byte) (*Manifest, error) { return parse(data, true) }

func parse(data []byte, lenient bool) (*Manifest, error) {
	if lenient && len(data) > legacyMaxSize {
		return nil, fmt.Errorf("the manifest is %d bytes, more than the %d allowed", len(data), legacyMaxSize)
	}
	if !lenient && len(data) > MaxSize {
		return nil, fmt.Errorf("the manifest is %d bytes, more than the %d allowed", len(data), MaxSize)
	}
	doc, err := decode(data)
	if err != nil {
		return nil, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the manifest must be a mapping with lease and services, not %s", describe(doc))
	}
	var ps problems
	checkValue(&ps, "", obj, manifestType)
	if err := ps.err(); err != nil {
		return nil, err
	}
	// The generic document now fits the schema: decode it for real.
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	// As the workflows carry it (Temporal's JSON: <, > and & take six
	// bytes each, YAML anchors are expanded), within MaxSize too.
	if enc, err := json.Marshal(&m); err == nil && len(enc) > MaxSize && !lenient {
		return nil, fmt.Errorf("the manifest is %d bytes as JSON (YAML anchors expanded; <, > and & are 6 bytes each), more than the %d allowed", len(enc), MaxSize)
	}
	validate := m.Validate
	if lenient {
		validate = m.ValidateLenient
	}
	if err := validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// maxDepth bounds the nesting of JSON input; a manifest needs 7 levels.
const maxDepth = 64

// decode turns YAML or JSON into the generic JSON value (maps, slices,
// strings, json.Numbers, bools and nils).
func decode(data []byte) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errEmpty
	}
	if trimmed[0] == '{' {
		v, err := decodeJSON(data)
		var syntax *jsonSyntaxError
		if err == nil || !errors.As(err, &syntax) {
			return v, err
		}
		// Perhaps YAML in flow style, {lease: x, ...}; if not, the JSON
		// error is the one to show.
		if v, yerr := decodeYAML(data); yerr == nil {
			return v, nil
		}
		return nil, err
	}
	return decodeYAML(data)
}

var errEmpty = errors.New("the manifest is empty: give lease and services")

// jsonSyntaxError is malformed JSON, located by line and column.
type jsonSyntaxError struct {
	line, col int
	msg       string
}

func (e *jsonSyntaxError) Error() string {
	return fmt.Sprintf("the manifest is not valid JSON: line %d, column %d: %s", e.line, e.col, e.msg)
}

func newJSONSyntaxError(data []byte, offset int64, msg string) error {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return &jsonSyntaxError{line: line, col: col, msg: msg}
}

// decodeJSON reads exactly one JSON value, rejecting duplicate keys.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readJSON(dec, data, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("the manifest has more after its closing '}' (at byte %d): give exactly one manifest", dec.InputOffset())
	}
	return v, nil
}

func readJSON(dec *json.Decoder, data []byte, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels deep", path, maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(dec, data, err)
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, jsonError(dec, data, err)
			}
			k, ok := kt.(string)
			if !ok {
				return nil, newJSONSyntaxError(data, dec.InputOffset(), "object keys must be strings")
			}
			kp := key(path, k)
			if _, dup := obj[k]; dup {
				return nil, &ValidationError{Problems: []Problem{{Path: kp, Message: "is given twice: keep only one"}}}
			}
			if obj[k], err = readJSON(dec, data, kp, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, jsonError(dec, data, err)
		}
		return obj, nil
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := readJSON(dec, data, index(path, len(arr)), depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, jsonError(dec, data, err)
		}
		return arr, nil
	}
	return tok, nil
}

func jsonError(dec *json.Decoder, data []byte, err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return newJSONSyntaxError(data, syntax.Offset, syntax.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return newJSONSyntaxError(data, int64(len(data)), "unexpected end of input: a closing '}' or ']' is missing")
	}
	return newJSONSyntaxError(data, dec.InputOffset(), err.Error())
}

// decodeYAML reads one YAML document (a leading '---' is fine, a second
// document is not), rejecting duplicate keys.
func decodeYAML(data []byte) (any, error) {
	if n := yamlDocuments(data); n > 1 {
		return nil, fmt.Errorf("the input holds %d YAML documents: give exactly one manifest (remove the extra documents after '---')", n)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(msg, "already set in map", "is given twice: keep only one")
		return nil, fmt.Errorf("the manifest is not valid YAML: %s", msg)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the manifest is not valid YAML: %w", err)
	}
	if v == nil {
		return nil, errEmpty
	}
	return v, nil
}

// yamlDocuments counts the YAML documents in data that hold more than
// comments. Document markers ("---" and "...") only ever start a line, even
// inside quoted or block scalars, so a line scan finds them.
func yamlDocuments(data []byte) int {
	docs, content := 0, false
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\r\n")
		rest := line
		switch {
		case isMarker(line, "---"):
			if content {
				docs++
			}
			content = false
			rest = line[3:]
		case isMarker(line, "..."):
			if content {
				docs++
			}
			content = false
			rest = line[3:]
		case bytes.HasPrefix(line, []byte("%")): // a directive
			continue
		}
		if t := bytes.TrimSpace(rest); len(t) > 0 && t[0] != '#' {
			content = true
		}
	}
	if content {
		docs++
	}
	return docs
}

func isMarker(line []byte, marker string) bool {
	return bytes.HasPrefix(line, []byte(marker)) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}

// The schema check: a walk of the generic document against the Go types,
// by their json tags.

var (
	manifestType    = reflect.TypeFor[Manifest]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	resourcesType   = reflect.TypeFor[Resources]()
)

// checkValue adds a Problem for every unknown field and every value of the
// wrong type in v, which should decode into a t. null is always fine: it
// leaves the field unset. Numbers given for resources become strings, the
// form of a quantity.
func checkValue(ps *problems, path string, v any, t reflect.Type) {
	if v == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == intOrStringType {
		switch x := v.(type) {
		case string:
			return
		case json.Number:
			if _, err := strconv.ParseInt(string(x), 10, 32); err == nil {
				return
			}
		}
		mismatch(ps, path, v, t)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			mismatch(ps, path, v, t)
			return
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			f, known := fields[k]
			if !known {
				ps.add(key(path, k), "%s", unknownField(k, t))
				continue
			}
			if n, isNumber := obj[k].(json.Number); isNumber && t == resourcesType {
				obj[k] = string(n) // quantities: cpu: 2 means "2"
			}
			checkValue(ps, key(path, k), obj[k], f)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			mismatch(ps, path, v, t)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			checkValue(ps, key(path, k), obj[k], t.Elem())
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			mismatch(ps, path, v, t)
			return
		}
		for i, e := range arr {
			checkValue(ps, index(path, i), e, t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			mismatch(ps, path, v, t)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			mismatch(ps, path, v, t)
		}
	case reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			mismatch(ps, path, v, t)
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			mismatch(ps, path, v, t)
		}
	default:
		panic("manifest: no schema check for " + t.String())
	}
}

// jsonFields maps a struct's JSON field names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	return fields
}

// want describes what a value of type t is written as.
func want(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == intOrStringType {
		return "a number of pods or a percentage like 25%"
	}
	switch t.Kind() {
	case reflect.Struct:
		return "a mapping with the fields " + strings.Join(slices.Sorted(maps.Keys(jsonFields(t))), ", ")
	case reflect.Map:
		return "a mapping of names to strings"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int32, reflect.Int64:
		return "a whole number"
	}
	return t.String()
}

// describe names a generic JSON value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return "the string " + strconv.Quote(x)
	case json.Number:
		return "the number " + string(x)
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	}
	return fmt.Sprintf("%T", v)
}

func mismatch(ps *problems, path string, v any, t reflect.Type) {
	msg := fmt.Sprintf("want %s, got %s", want(t), describe(v))
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case bool:
		if t.Kind() == reflect.String {
			msg += ": put the value in quotes (YAML reads unquoted true, false, yes, no, on and off as booleans)"
		}
	case json.Number:
		_, err := strconv.ParseInt(string(x), 10, 64)
		switch {
		case t.Kind() == reflect.String:
			msg += ": put the value in quotes"
		case t.Kind() == reflect.Slice:
			msg += fmt.Sprintf(": write it as a list, [%s]", x)
		case err == nil || errors.Is(err, strconv.ErrRange):
			msg += fmt.Sprintf(", which is out of range (%d to %d)", math.MinInt32, math.MaxInt32)
		}
	case map[string]any:
		if t.Kind() == reflect.Slice {
			msg += ": write each entry as a list item, starting with '- '"
		}
	case string:
		_, err := strconv.ParseInt(x, 10, 32)
		switch {
		case err == nil && (t.Kind() == reflect.Int32 || t == intOrStringType):
			msg += ": remove the quotes"
		case t.Kind() == reflect.Slice:
			msg += fmt.Sprintf(": write it as a list, [%s]", x)
		}
	}
	ps.add(path, "%s", msg)
}

// unknownField explains an unknown field k of a t: the field probably meant
// here, or where k belongs, or which fields there are.
func unknownField(k string, t reflect.Type) string {
	fields := slices.Sorted(maps.Keys(jsonFields(t)))
	for _, f := range fields {
		if strings.EqualFold(f, k) {
			return fmt.Sprintf("unknown field; did you mean %s? (field names are case-sensitive)", f)
		}
	}
	best, dist := nearest(k, fields)
	if dist == 1 {
		return fmt.Sprintf("unknown field; did you mean %s?", best)
	}
	if where := elsewhere(k, t); len(where) > 0 {
		return fmt.Sprintf("unknown field here; %s belongs at %s", k, strings.Join(where, " or "))
	}
	if best != "" && (dist <= 2 || dist*3 <= len(best)) {
		return fmt.Sprintf("unknown field; did you mean %s?", best)
	}
	if len(k) >= 3 {
		for _, f := range fields {
			if lf, lk := strings.ToLower(f), strings.ToLower(k); strings.HasPrefix(lf, lk) || strings.HasPrefix(lk, lf) {
				return fmt.Sprintf("unknown field; did you mean %s?", f)
			}
		}
	}
	return "unknown field; the fields here are " + strings.Join(fields, ", ")
}

// Nearest is the name among names closest to k (a misspelt field), if one
// is close enough to suggest, else "".
func Nearest(k string, names []string) string {
	best, dist := nearest(k, names)
	if best != "" && (dist <= 2 || dist*3 <= len(best)) {
		return best
	}
	return ""
}

// nearest is the name in names closest to k by edit distance, ignoring case.
func nearest(k string, names []string) (string, int) {
	best, dist := "", math.MaxInt
	if len(k) > 64 {
		return best, dist
	}
	for _, n := range names {
		if d := editDistance(strings.ToLower(k), strings.ToLower(n)); d < dist {
			best, dist = n, d
		}
	}
	return best, dist
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fieldPlaces maps every field name of the schema to where it is written,
// like services[].rollout.maxSurge, and the type holding it.
var fieldPlaces = func() map[string][]place {
	places := map[string][]place{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for name, ft := range jsonFields(t) {
			p := field(prefix, name)
			places[name] = append(places[name], place{path: p, in: t})
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != intOrStringType:
				walk(p, ft)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(p+"[]", ft.Elem())
			}
		}
	}
	walk("", manifestType)
	return places
}()

type place struct {
	path string
	in   reflect.Type
}

// elsewhere lists where in the schema, other than in a t, a field named k
// (ignoring case) belongs.
func elsewhere(k string, t reflect.Type) []string {
	var out []string
	for name, ps := range fieldPlaces {
		if !strings.EqualFold(name, k) {
			continue
		}
		for _, p := range ps {
			if p.in != t {
				out = append(out, p.path)
			}
		}
	}
	slices.Sort(out)
	return out
}
