package manifest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A service's secrets (issue 37.3): the login to its image's private
// registry (Credentials, as an Akash SDL's service has it) and
// environment variables whose values are secret (SecretEnv). In the
// cluster each is a Secret of the lease's namespace the pod refers to
// (imagePullSecrets, secretKeyRef); nowhere else does a value appear in
// plain text. Temporal holds them only encrypted (internal/codec: a worker
// without keys refuses them), and everything deployflow prints, logs or
// sends shows them Redacted.
//
// Each Secret is immutable and named by a digest of its content, as
// kustomize's secretGenerator names them: a new value is a new Secret and
// a new pod template, so a redeploy with new values rolls the pods, and a
// ReplicaSet kept for an undo still finds the Secret it was made with.

// Credentials are a private registry's login.
type Credentials struct {
	// Host is the registry (ghcr.io, registry.example.com:5000); it must
	// be the image's (docker.io for an image without a host).
	Host string `json:"host"`
	// Username is the login's user.
	Username string `json:"username"`
	// Password, or Token (an access token in its place): exactly one.
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

// The bounds of a service's secrets.
const (
	MaxSecretEnv         = 64        // secret environment variables of a service
	MaxSecretValueBytes  = 32 << 10  // one value, a password or a token
	MaxSecretBytes       = 256 << 10 // a service's secret values together
	MaxRegistryHostBytes = 253 + 6
	MaxUsernameBytes     = 256
)

// Redacted is what deployflow shows in place of a secret value.
const Redacted = "<redacted>"

// Labels of the Secrets deployflow writes: SecretLabel is the service
// they belong to, SecretDigestLabel their content's digest (the name's
// suffix), by which those no ReplicaSet refers to are deleted without
// being read.
const (
	SecretLabel       = "deployflow.dev/secret-of"
	SecretDigestLabel = "deployflow.dev/secret-digest"
)

// HasSecrets reports whether m carries a secret value.
func (m *Manifest) HasSecrets() bool {
	if m == nil {
		return false
	}
	for i := range m.Services {
		if m.Services[i].hasSecrets() {
			return true
		}
	}
	return false
}

func (s *Service) hasSecrets() bool { return s.Credentials != nil || len(s.SecretEnv) > 0 }

func (c *Credentials) clone() *Credentials {
	if c == nil {
		return nil
	}
	out := *c
	return &out
}

// Redacted is a copy of m with every secret value replaced by Redacted
// (the names stay): what deployflow prints, logs, plans and sends.
func (m *Manifest) Redacted() *Manifest {
	if m == nil || !m.HasSecrets() {
		return m
	}
	out := *m
	out.Services = slices.Clone(m.Services)
	for i := range out.Services {
		s := &out.Services[i]
		if c := s.Credentials; c != nil {
			r := *c
			if r.Password != "" {
				r.Password = Redacted
			}
			if r.Token != "" {
				r.Token = Redacted
			}
			s.Credentials = &r
		}
		if len(s.SecretEnv) > 0 {
			env := make(map[string]string, len(s.SecretEnv))
			for k := range s.SecretEnv {
				env[k] = Redacted
			}
			s.SecretEnv = env
		}
	}
	return &out
}

// RedactString is text with every secret value of m replaced by Redacted:
// for errors and logs that might quote one (an API server's message).
func (m *Manifest) RedactString(text string) string {
	if m == nil {
		return text
	}
	for i := range m.Services {
		s := &m.Services[i]
		var values []string
		if c := s.Credentials; c != nil {
			values = append(values, c.Password, c.Token)
		}
		for _, v := range s.SecretEnv {
			values = append(values, v)
		}
		for _, v := range values {
			if len(v) >= 4 { // shorter is no secret and would garble the text
				text = strings.ReplaceAll(text, v, Redacted)
			}
		}
	}
	return text
}

// secrets adds a problem for each of s's secrets out of bounds.
// No message quotes a value.
func (v *validator) secrets(path string, s *Service) {
	if c := s.Credentials; c != nil {
		cp := field(path, "credentials")
		host := imageHost(s.Image)
		switch {
		case c.Host == "":
			v.add(field(cp, "host"), "is required: the registry's host, %s for this image", host)
		case len(c.Host) > MaxRegistryHostBytes || !validRegistryHost(c.Host):
			v.add(field(cp, "host"), "%q is not a registry host: write host or host:port, e.g. ghcr.io", truncate(c.Host, 80))
		case s.Image != "" && normalHost(c.Host) != host:
			v.add(field(cp, "host"), "%q is not the image's registry (%s): the pods would pull without these credentials; give %s", truncate(c.Host, 80), host, host)
		}
		switch {
		case c.Username == "":
			v.add(field(cp, "username"), "is required: the registry login's user")
		case len(c.Username) > MaxUsernameBytes || strings.ContainsRune(c.Username, ':') || !printableNoSpace(c.Username):
			v.add(field(cp, "username"), "is not a registry user name: at most %d printable characters, no ':' or spaces", MaxUsernameBytes)
		}
		switch {
		case c.Password == "" && c.Token == "":
			v.add(field(cp, "password"), "is required: give the password, or token (an access token in its place)")
		case c.Password != "" && c.Token != "":
			v.add(field(cp, "token"), "password and token both set: give one (a token goes in the password's place)")
		}
		for _, f := range []struct{ name, value string }{{"password", c.Password}, {"token", c.Token}} {
			if len(f.value) > MaxSecretValueBytes {
				v.add(field(cp, f.name), "is %d bytes: at most %d", len(f.value), MaxSecretValueBytes)
			}
		}
	}
	if len(s.SecretEnv) > MaxSecretEnv {
		v.add(field(path, "secretEnv"), "%d variables: at most %d per service", len(s.SecretEnv), MaxSecretEnv)
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(s.SecretEnv)) {
		kp := key(field(path, "secretEnv"), k)
		total += len(s.SecretEnv[k])
		switch {
		case len(validation.IsEnvVarName(k)) > 0:
			v.add(kp, "%q is not a valid environment variable name: use letters, digits, '_', '-' and '.', not starting with a digit (e.g. DB_PASSWORD)", truncate(k, 80))
		case len(s.SecretEnv[k]) > MaxSecretValueBytes:
			v.add(kp, "the value is %d bytes: at most %d", len(s.SecretEnv[k]), MaxSecretValueBytes)
		}
		if _, plain := s.Env[k]; plain {
			v.add(kp, "is in env too: give each variable once, in env or in secretEnv")
		}
	}
	if total > MaxSecretBytes {
		v.add(field(path, "secretEnv"), "its values are %d bytes: at most %d per service", total, MaxSecretBytes)
	}
}

func printableNoSpace(s string) bool {
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// validRegistryHost: a DNS name or localhost, with an optional port.
func validRegistryHost(h string) bool {
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort && (port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "") {
		return false
	}
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// imageHost is the registry an image reference pulls from: its first
// path component if that is a host, else docker.io.
func imageHost(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return normalHost(first)
	}
	return "docker.io"
}

func normalHost(h string) string {
	h = strings.ToLower(h)
	if h == "index.docker.io" || h == "registry-1.docker.io" {
		return "docker.io"
	}
	return h
}

// The kinds of a service's Secrets, the middle of their names.
const (
	secretKindRegistry = "registry"
	secretKindEnv      = "env"
)

// secretName is the name of s's Secret of kind with data: the service,
// the kind and 16 hex digits of a digest of the lease, the service and
// the content.
func secretName(lease, svc, kind string, data map[string][]byte) (name, digest string) {
	h := sha256.New()
	for _, part := range []string{lease, svc, kind} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(data[k])
		h.Write([]byte{0})
	}
	digest = hex.EncodeToString(h.Sum(nil))[:16]
	return svc + "-" + kind + "-" + digest, digest
}

// dockerConfig is a registry login as a kubernetes.io/dockerconfigjson
// Secret holds it.
func (c *Credentials) dockerConfig() []byte {
	secret := c.Password
	if secret == "" {
		secret = c.Token
	}
	host := c.Host
	if normalHost(host) == "docker.io" {
		host = "https://index.docker.io/v1/"
	}
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	b, _ := json.Marshal(map[string]map[string]entry{"auths": {host: {
		Username: c.Username, Password: secret,
		Auth: base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + secret)),
	}}})
	return b
}

// serviceSecrets are s's Secrets, registry first.
func serviceSecrets(lease string, s *Service) []*corev1.Secret {
	var out []*corev1.Secret
	add := func(kind string, typ corev1.SecretType, data map[string][]byte) {
		name, digest := secretName(lease, s.Name, kind, data)
		labels := objectLabels(lease, s.Name)
		labels[SecretLabel] = s.Name
		labels[SecretDigestLabel] = digest
		out = append(out, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace(lease), Labels: labels},
			Type:       typ,
			Immutable:  new(true),
			Data:       data,
		})
	}
	if c := s.Credentials; c != nil {
		add(secretKindRegistry, corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: c.dockerConfig()})
	}
	if len(s.SecretEnv) > 0 {
		data := make(map[string][]byte, len(s.SecretEnv))
		for k, v := range s.SecretEnv {
			data[k] = []byte(v)
		}
		add(secretKindEnv, corev1.SecretTypeOpaque, data)
	}
	return out
}

// Secrets are the Secrets the lease's services refer to, in manifest
// order; each is immutable and named by its content.
func (m *Manifest) Secrets() []*corev1.Secret {
	var out []*corev1.Secret
	for i := range m.Services {
		out = append(out, serviceSecrets(m.Lease, &m.Services[i])...)
	}
	return out
}

// podSecrets sets the pod's references to s's Secrets: the registry
// login as its image pull secret, each secret env value from its key.
func (s *Service) podSecrets(lease string, pod *corev1.PodSpec) {
	for _, sec := range serviceSecrets(lease, s) {
		switch sec.Type {
		case corev1.SecretTypeDockerConfigJson:
			pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: sec.Name}}
		default:
			c := &pod.Containers[0]
			for _, k := range slices.Sorted(maps.Keys(sec.Data)) {
				c.Env = append(c.Env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}, Key: k},
				}})
			}
			slices.SortStableFunc(c.Env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
		}
	}
}
