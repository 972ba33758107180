package manifest

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Problem is one thing wrong with a manifest: where (a JSON path such as
// services[1].ports[0].expose.http.hostnames[0]; empty for the manifest as a
// whole) and what, including how to fix it.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String is "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists everything wrong with a manifest. Parse and Validate
// return it (as error) so a caller can show every problem at once; use
// errors.As to get at the list.
type ValidationError struct {
	Problems []Problem `json:"problems"`
}

// Error is the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems in the order they are found.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// err is nil without problems, else a *ValidationError.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Path helpers: field(p, "name") is p.name, index(p, 2) is p[2] and key(p, k)
// is p.k for identifier-like keys and p["k"] otherwise.
func field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func index(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func key(parent, k string) string {
	if identRE.MatchString(k) {
		return field(parent, k)
	}
	return parent + "[" + strconv.Quote(k) + "]"
}

// Validate checks m and returns a *ValidationError naming every problem,
// each with its JSON path and how to fix it, or nil. It checks m as written;
// defaults are taken into account (a manifest that validates also validates
// after WithDefaults). Parse validates already; call Validate on a manifest
// that arrives as a struct, such as the deploy workflow's input.
func (m *Manifest) Validate() error { return m.validate(false) }

// ValidateLenient is Validate as it was before issue 20's stricter
// analyses (see ParseLenient).
func (m *Manifest) ValidateLenient() error { return m.validate(true) }

func (m *Manifest) validate(lenient bool) error {
	if m == nil {
		return (problems{{Message: "the manifest is empty: give lease and services"}}).err()
	}
	v := validator{
		lenient:    lenient,
		serviceAt:  map[string]int{},
		hostAt:     map[string]string{},
		ipPortAt:   map[string]use{},
		lbNameFrom: map[string]use{},
		previewOf:  map[string]use{},
	}
	v.lease(m.Lease)
	if len(m.Services) == 0 {
		v.add("services", "is empty: list at least one service, e.g. services: [{name: web, image: nginx:1.27}]")
	}
	for i := range m.Services {
		v.service(index("services", i), i, &m.Services[i])
	}
	if m.Placement != nil {
		v.placement(m.Placement)
	}
	// Preview Service names must not take a service's name either.
	for _, name := range slices.Sorted(maps.Keys(v.previewOf)) {
		if i, ok := v.serviceAt[name]; ok {
			what := "blue-green preview"
			if u := v.previewOf[name]; u.role != "" {
				what = u.role
			}
			v.add(v.previewOf[name].path, "its %s Service, %q, has the same name as services[%d]: rename one of the two services", what, name, i)
		}
	}
	// Generated LoadBalancer Service names must not take a service's name.
	for _, name := range slices.Sorted(maps.Keys(v.lbNameFrom)) {
		if i, ok := v.serviceAt[name]; ok {
			v.add(v.lbNameFrom[name].path, "the LoadBalancer Service it needs, %q, has the same name as services[%d]: rename that service or use another endpoint name", name, i)
		}
	}
	return v.problems.err()
}

// use is where a service uses something: the path, the service's name and,
// for LoadBalancer Service names, the IP endpoint.
type use struct{ path, svc, endpoint, role string } // role: a generated Service's, if not a preview

// validator carries what Validate must see across services.
type validator struct {
	problems
	lenient    bool              // the rules before issue 20's stricter analyses
	serviceAt  map[string]int    // service name -> index of its first use
	hostAt     map[string]string // hostname -> path of its first use
	ipPortAt   map[string]use    // "endpoint port/protocol" -> its first use
	lbNameFrom map[string]use    // LoadBalancer Service name -> its first use
	previewOf  map[string]use    // a preview, stable or canary Service's name -> its service (svc: the canary's role)
}

func (v *validator) lease(lease string) {
	const path = "lease"
	switch {
	case lease == "":
		v.add(path, "is required: give the lease ID (lowercase letters, digits and '-', at most %d characters)", MaxLeaseLength)
	case len(lease) > MaxLeaseLength:
		v.add(path, "%q is %d characters long: lease IDs have at most %d, so that the namespace %s<lease> is a valid name", lease, len(lease), MaxLeaseLength, NamespacePrefix)
	case len(validation.IsDNS1123Label(lease)) > 0:
		v.add(path, "%q is not a valid lease ID: use lowercase letters, digits and '-', starting and ending with a letter or digit%s", lease, lowerHint(lease, func(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }))
	}
}

// lowerHint suggests the lowercase spelling of s when that one is valid.
func lowerHint(s string, valid func(string) bool) string {
	if l := strings.ToLower(s); l != s && valid(l) {
		return fmt.Sprintf(" (e.g. %q)", l)
	}
	return ""
}

func (v *validator) service(path string, i int, s *Service) {
	np := field(path, "name")
	switch {
	case s.Name == "":
		v.add(np, "is required: give the service a name like web (lowercase letters, digits and '-', starting with a letter)")
	case len(s.Name) > MaxServiceNameLength:
		v.add(np, "%q is %d characters long: service names have at most %d", s.Name, len(s.Name), MaxServiceNameLength)
	case !validServiceName(s.Name):
		v.add(np, "%q is not a valid service name: use lowercase letters, digits and '-', starting with a letter and ending with a letter or digit%s", s.Name, lowerHint(s.Name, validServiceName))
	default:
		if j, dup := v.serviceAt[s.Name]; dup {
			v.add(np, "%q is already the name of services[%d]: service names must be unique; rename one of them", s.Name, j)
		} else {
			v.serviceAt[s.Name] = i
		}
	}

	if msg := imageProblem(s.Image); msg != "" {
		v.add(field(path, "image"), "%s", msg)
	}

	if r := s.Replicas; r != nil {
		switch {
		case *r < 0:
			v.add(field(path, "replicas"), "%d is negative: use 0 to %d (0 stops the service)", *r, MaxReplicas)
		case *r > MaxReplicas:
			v.add(field(path, "replicas"), "%d is too many: use at most %d", *r, MaxReplicas)
		}
	}

	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if len(validation.IsEnvVarName(k)) > 0 {
			v.add(key(field(path, "env"), k), "%q is not a valid environment variable name: use letters, digits, '_', '-' and '.', not starting with a digit (e.g. LOG_LEVEL)", k)
		}
	}

	if r := s.Resources; r != nil {
		v.quantity(field(path, "resources.cpu"), r.CPU, "500m or 2")
		v.quantity(field(path, "resources.memory"), r.Memory, "256Mi or 1Gi")
		v.quantity(field(path, "resources.ephemeralStorage"), r.EphemeralStorage, "1Gi or 500Mi")
		r.GPU.validate(v, field(path, "resources.gpu"))
	}

	v.ports(path, s)
	v.rollout(field(path, "rollout"), s.Rollout)
	if r := s.Rollout; r != nil && r.Strategy == StrategyBlueGreen {
		replicas := DefaultReplicas
		if s.Replicas != nil {
			replicas = *s.Replicas
		}
		v.blueGreen(field(path, "rollout.blueGreen"), r.BlueGreen, replicas)
		if len(s.Ports) == 0 {
			v.add(field(path, "rollout.strategy"), "BlueGreen switches the service's Services between versions, and %q has no ports: add a port, or use RollingUpdate", s.Name)
		}
		if s.Name != "" {
			v.previewOf[PreviewService(s.Name)] = use{path: field(path, "name"), svc: s.Name}
		}
	}
	if s.TrafficRouted() && s.Name != "" {
		// Where the operator routes through a Gateway, the canary's
		// stable and canary Services.
		v.previewOf[StableService(s.Name)] = use{path: field(path, "name"), svc: s.Name, role: "canary's stable"}
		v.previewOf[CanaryService(s.Name)] = use{path: field(path, "name"), svc: s.Name, role: "canary's canary"}
	}
	v.podLabels(field(path, "podLabels"), s.PodLabels)
	v.podAnnotations(field(path, "podAnnotations"), s.PodAnnotations)
	v.security(field(path, "security"), s.Security)
	v.probes(path, s)
	v.secrets(path, s)
	v.volumes(path, s)
}

func validServiceName(s string) bool { return len(validation.IsDNS1035Label(s)) == 0 }

func (v *validator) quantity(path, q, example string) {
	if q == "" {
		return
	}
	parsed, err := resource.ParseQuantity(q)
	switch {
	case err != nil:
		v.add(path, "%q is not a Kubernetes quantity: write e.g. %s", q, example)
	case parsed.Sign() <= 0:
		v.add(path, "%q must be greater than zero: write e.g. %s, or leave it out", q, example)
	}
}

func (v *validator) ports(path string, s *Service) {
	at := map[int32]int{}
	for j, p := range s.Ports {
		pp := index(field(path, "ports"), j)
		switch {
		case p.Port == 0:
			v.add(field(pp, "port"), "is required: give the port number, 1-65535")
		case p.Port < 1 || p.Port > 65535:
			v.add(field(pp, "port"), "%d is out of range: use 1-65535", p.Port)
		default:
			if k, dup := at[p.Port]; dup {
				v.add(field(pp, "port"), "%d is already listed at %s: list each port once per service", p.Port, index(field(path, "ports"), k))
			} else {
				at[p.Port] = j
			}
		}
		if p.TargetPort < 0 || p.TargetPort > 65535 {
			v.add(field(pp, "targetPort"), "%d is out of range: use 1-65535, or leave it out to use port", p.TargetPort)
		}
		proto := p.Protocol
		switch proto {
		case "":
			proto = DefaultProtocol
		case ProtocolTCP, ProtocolUDP:
		default:
			hint := ""
			if u := strings.ToUpper(proto); u == ProtocolTCP || u == ProtocolUDP {
				hint = fmt.Sprintf(" (write %q)", u)
			}
			v.add(field(pp, "protocol"), "%q: want TCP or UDP%s", p.Protocol, hint)
		}
		if p.Expose != nil {
			v.expose(field(pp, "expose"), s.Name, p, proto)
		}
	}
}

func (v *validator) expose(path, svc string, p Port, proto string) {
	e := p.Expose
	if e.HTTP == nil && e.IP == "" {
		v.add(path, "says neither http nor ip: give http.hostnames, an ip endpoint name, or both; or remove expose")
	}
	if h := e.HTTP; h != nil {
		hp := field(path, "http")
		if proto != ProtocolTCP {
			v.add(hp, "needs a TCP port, and this one is %s: remove http or set protocol TCP", proto)
		}
		if len(h.Hostnames) == 0 {
			v.add(field(hp, "hostnames"), "is empty: list at least one host name, like www.example.com, or remove http")
		}
		for k, host := range h.Hostnames {
			kp := index(field(hp, "hostnames"), k)
			if msg := hostnameProblem(host); msg != "" {
				v.add(kp, "%s", msg)
				continue
			}
			if first, dup := v.hostAt[host]; dup {
				v.add(kp, "%q is already routed by %s: a host name may be used once per manifest; remove one", host, first)
			} else {
				v.hostAt[host] = kp
			}
		}
	}
	if e.IP != "" {
		ipp := field(path, "ip")
		if len(validation.IsDNS1123Label(e.IP)) > 0 {
			v.add(ipp, "%q is not a valid IP endpoint name: use the endpoint's name, lowercase letters, digits and '-', starting and ending with a letter or digit%s", e.IP, lowerHint(e.IP, func(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }))
			return
		}
		if svc != "" && validServiceName(svc) {
			name := lbServiceName(svc, e.IP)
			if len(name) > validation.DNS1035LabelMaxLength {
				v.add(ipp, "the LoadBalancer Service for it would be named %q, %d characters, more than Kubernetes' %d: shorten the service or endpoint name", name, len(name), validation.DNS1035LabelMaxLength)
			} else if first, seen := v.lbNameFrom[name]; !seen {
				v.lbNameFrom[name] = use{path: ipp, svc: svc, endpoint: e.IP}
			} else if first.svc != svc {
				v.add(ipp, "the LoadBalancer Service for it would be named %q, like the one for %s (service %q, endpoint %q): rename the service or the endpoint", name, first.path, first.svc, first.endpoint)
			}
		}
		if p.Port >= 1 && p.Port <= 65535 {
			k := fmt.Sprintf("%s %d/%s", e.IP, p.Port, proto)
			if first, dup := v.ipPortAt[k]; !dup {
				v.ipPortAt[k] = use{path: ipp, svc: svc}
			} else if first.svc != svc { // a repeat within a service is a duplicate port, reported above
				v.add(ipp, "port %d/%s on IP endpoint %q is already exposed by %s: use another port or another endpoint", p.Port, proto, e.IP, first.path)
			}
		}
	}
}

// hostnameProblem says what is wrong with an HTTP host name, or "".
func hostnameProblem(h string) string {
	isDNS := func(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }
	switch {
	case h == "":
		return "is empty: give a fully qualified host name like www.example.com"
	case strings.Contains(h, "*"):
		return fmt.Sprintf("%q: wildcard hostnames are not allowed; list each hostname", h)
	case len(h) > MaxHostnameLength:
		return fmt.Sprintf("%q is %d characters long: host names have at most %d", h, len(h), MaxHostnameLength)
	case h != strings.ToLower(h):
		return fmt.Sprintf("%q: host names must be lowercase%s", h, lowerHint(h, isDNS))
	case strings.HasSuffix(h, ".") && isDNS(strings.TrimSuffix(h, ".")):
		return fmt.Sprintf("%q: leave out the trailing dot: write %q", h, strings.TrimSuffix(h, "."))
	case net.ParseIP(h) != nil:
		return fmt.Sprintf("%q is an IP address: HTTP exposure routes host names; use a DNS name, or expose.ip for an IP", h)
	case !isDNS(h):
		return fmt.Sprintf("%q is not a valid host name: use lowercase letters, digits, '-' and '.', each label starting and ending with a letter or digit", h)
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) > validation.DNS1123LabelMaxLength {
			return fmt.Sprintf("%q: label %q is %d characters long; DNS labels have at most %d", h, label, len(label), validation.DNS1123LabelMaxLength)
		}
	}
	if !strings.Contains(h, ".") {
		return fmt.Sprintf("%q is not fully qualified: give the full name, like %s.example.com", h, h)
	}
	return ""
}

func (v *validator) rollout(path string, r *Rollout) {
	if r == nil {
		return
	}
	if r.Strategy != StrategyCanary && len(r.Steps) > 0 {
		v.add(field(path, "steps"), "are for strategy Canary: set strategy: Canary, or remove the steps")
	}
	if a := r.Analysis; a != nil {
		if r.Strategy != StrategyCanary {
			v.add(field(path, "analysis"), "a background analysis is for strategy Canary (a BlueGreen has blueGreen.prePromotionAnalysis and postPromotionAnalysis)")
		} else {
			v.analysis(field(path, "analysis"), a)
		}
	}
	if d := r.ScaleDownDelaySeconds; d != nil {
		switch {
		case r.Strategy != StrategyCanary:
			v.add(field(path, "scaleDownDelaySeconds"), "is for strategy Canary (a BlueGreen has blueGreen.scaleDownDelaySeconds)")
		case *d < 0 || *d > MaxScaleDownDelaySeconds:
			v.add(field(path, "scaleDownDelaySeconds"), "%d: want 0 to %d seconds", *d, MaxScaleDownDelaySeconds)
		}
	}
	if r.Strategy != StrategyBlueGreen && r.BlueGreen != nil {
		v.add(field(path, "blueGreen"), "is for strategy BlueGreen: set strategy: BlueGreen, or remove blueGreen")
	}
	switch r.Strategy {
	case "", StrategyRollingUpdate, StrategyCanary, StrategyBlueGreen:
		if r.Strategy == StrategyCanary {
			v.canarySteps(field(path, "steps"), r.Steps)
		}
		surgeOK := v.intOrPercent(field(path, "maxSurge"), r.MaxSurge)
		unavailOK := v.intOrPercent(field(path, "maxUnavailable"), r.MaxUnavailable)
		surge, unavail := r.MaxSurge, r.MaxUnavailable
		if surge == nil {
			d := intstr.FromString(DefaultMaxSurge)
			surge = &d
		}
		if unavail == nil {
			d := intstr.FromString(DefaultMaxUnavailable)
			unavail = &d
		}
		if surgeOK && unavailOK && isZero(surge) && isZero(unavail) {
			v.add(path, "maxSurge and maxUnavailable are both 0: the rollout could never progress; make one of them positive")
		}
	case StrategyRecreate:
		if r.MaxSurge != nil {
			v.add(field(path, "maxSurge"), "is not allowed with strategy Recreate: remove it, or use strategy RollingUpdate")
		}
		if r.MaxUnavailable != nil {
			v.add(field(path, "maxUnavailable"), "is not allowed with strategy Recreate: remove it, or use strategy RollingUpdate")
		}
	default:
		hint := ""
		for _, s := range []string{StrategyRollingUpdate, StrategyRecreate, StrategyCanary, StrategyBlueGreen} {
			if strings.EqualFold(r.Strategy, s) {
				hint = fmt.Sprintf(" (write %q)", s)
			}
		}
		v.add(field(path, "strategy"), "%q: want RollingUpdate, Recreate, Canary or BlueGreen%s", r.Strategy, hint)
	}
	if r.MinReadySeconds < 0 {
		v.add(field(path, "minReadySeconds"), "%d is negative: use 0 or more seconds", r.MinReadySeconds)
	}
	if pd := r.ProgressDeadlineSeconds; pd == nil {
		if r.MinReadySeconds >= DefaultProgressDeadlineSeconds {
			v.add(field(path, "progressDeadlineSeconds"), "the default, %d, is not greater than minReadySeconds (%d): set progressDeadlineSeconds above minReadySeconds", DefaultProgressDeadlineSeconds, r.MinReadySeconds)
		}
	} else if *pd <= r.MinReadySeconds || *pd <= 0 {
		v.add(field(path, "progressDeadlineSeconds"), "%d must be greater than minReadySeconds (%d) and 0: raise it", *pd, r.MinReadySeconds)
	}
	if h := r.RevisionHistoryLimit; h != nil && *h < 0 {
		v.add(field(path, "revisionHistoryLimit"), "%d is negative: use 0 or more (the default is %d)", *h, DefaultRevisionHistoryLimit)
	}
}

var percentRE = regexp.MustCompile(`^(-?)([0-9]+)%$`)

// intOrPercent checks a maxSurge or maxUnavailable; it reports whether the
// value is usable.
func (v *validator) intOrPercent(path string, x *intstr.IntOrString) bool {
	if x == nil {
		return true
	}
	const want = "use a number of pods (0 or more) or a percentage of replicas from 0% to 100%, like 25%"
	if x.Type == intstr.Int {
		if x.IntVal < 0 {
			v.add(path, "%d is negative: %s", x.IntVal, want)
			return false
		}
		return true
	}
	m := percentRE.FindStringSubmatch(x.StrVal)
	if m == nil {
		if _, err := strconv.Atoi(x.StrVal); err == nil {
			v.add(path, "%q is a string: write %s without quotes for a number of pods, or %q for a percentage", x.StrVal, x.StrVal, x.StrVal+"%")
		} else {
			v.add(path, "%q is neither a number nor a percentage: %s", x.StrVal, want)
		}
		return false
	}
	if m[1] == "-" {
		v.add(path, "%q is negative: %s", x.StrVal, want)
		return false
	}
	if n, err := strconv.Atoi(m[2]); err != nil || n > 100 {
		v.add(path, "%q is more than 100%%: %s", x.StrVal, want)
		return false
	}
	return true
}

// isZero reports whether a valid maxSurge or maxUnavailable is zero.
func isZero(x *intstr.IntOrString) bool {
	if x.Type == intstr.Int {
		return x.IntVal == 0
	}
	return strings.Trim(x.StrVal, "0") == "%"
}

// reservedPodLabels are set by deployflow or Kubernetes on every pod.
var reservedPodLabels = map[string]string{
	AppLabel:            "deployflow sets it to the service name and selects pods by it",
	"pod-template-hash": "Kubernetes sets it to tell the ReplicaSets of a service apart",
	LeaseLabel:          "deployflow sets it to the lease ID",
	ServiceLabel:        "deployflow sets it to the service name",
}

func (v *validator) podLabels(path string, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kp := key(path, k)
		if why, reserved := reservedPodLabels[k]; reserved {
			v.add(kp, "%q is reserved (%s): remove it or use another key", k, why)
			continue
		}
		if len(validation.IsQualifiedName(k)) > 0 {
			v.add(kp, "%q is not a valid label key: use a name of at most 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit, optionally after a DNS prefix and '/' (e.g. tier or example.com/tier)", k)
			continue
		}
		if val := labels[k]; len(validation.IsValidLabelValue(val)) > 0 {
			v.add(kp, "value %q is not a valid label value: use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, or leave it empty", val)
		}
	}
}

// maxAnnotationsSize is Kubernetes' limit on an object's annotations.
const maxAnnotationsSize = 256 << 10

func (v *validator) podAnnotations(path string, annotations map[string]string) {
	size := 0
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		size += len(k) + len(annotations[k])
		if len(validation.IsQualifiedName(strings.ToLower(k))) > 0 {
			v.add(key(path, k), "%q is not a valid annotation key: use a name of at most 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit, optionally after a DNS prefix and '/' (e.g. example.com/owner)", k)
		}
	}
	if size > maxAnnotationsSize {
		v.add(path, "are %d bytes in all, more than Kubernetes' %d: shorten or remove some", size, maxAnnotationsSize)
	}
}

// Image references: [registry[:port]/]path[:tag][@sha256:<64 hex>].
var (
	domainRE    = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$`)
	componentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagRE       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestRE    = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// maxImageNameLength is the registry's limit on registry/path.
const maxImageNameLength = 255

const imageExample = "e.g. nginx:1.27 or registry.example.com:5000/team/app:v2@sha256:<64 hex digits>"

// imageProblem says what is wrong with an image reference, or "".
func imageProblem(ref string) string {
	if ref == "" {
		return "is required: give the container image, " + imageExample
	}
	if strings.IndexFunc(ref, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Sprintf("%q contains spaces or control characters: give a reference, %s", ref, imageExample)
	}
	name := ref
	if at := strings.IndexByte(name, '@'); at >= 0 {
		digest := name[at+1:]
		name = name[:at]
		if !digestRE.MatchString(digest) {
			return fmt.Sprintf("%q: the digest must be sha256: followed by 64 lowercase hex digits", ref)
		}
	}
	last := strings.LastIndexByte(name, '/') + 1 // start of the last path component
	if colon := strings.LastIndexByte(name[last:], ':'); colon >= 0 {
		tag := name[last+colon+1:]
		name = name[:last+colon]
		if !tagRE.MatchString(tag) {
			return fmt.Sprintf("%q: the tag %q is invalid: use at most 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'", ref, tag)
		}
	}
	if name == "" {
		return fmt.Sprintf("%q has no repository name: %s", ref, imageExample)
	}
	if len(name) > maxImageNameLength {
		return fmt.Sprintf("%q: the name is %d characters long; image names have at most %d", ref, len(name), maxImageNameLength)
	}
	parts := strings.Split(name, "/")
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:[") || parts[0] == "localhost") {
		if !domainRE.MatchString(parts[0]) {
			return fmt.Sprintf("%q: the registry %q is not a valid host[:port]", ref, parts[0])
		}
		parts = parts[1:]
	}
	for _, c := range parts {
		switch {
		case c == "":
			return fmt.Sprintf("%q has an empty path component: remove the extra '/'", ref)
		case componentRE.MatchString(c):
		case componentRE.MatchString(strings.ToLower(c)):
			return fmt.Sprintf("%q: the repository path must be lowercase (%q)", ref, strings.ToLower(c))
		default:
			return fmt.Sprintf("%q: the path component %q is invalid: use lowercase letters and digits, separated by '.', '_', '__' or '-'", ref, c)
		}
	}
	return ""
}
