package manifest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
)

// Issue 35.4: before it, a service's pod template carried no security
// context at all (root, NET_RAW, privilege escalation, no seccomp), and
// `--pod-security restricted` refused every pod. A manifest taken by a
// lease (Hardened) now renders pods that pass the baseline level as they
// are, and the restricted level once the manifest says its container can
// run as non-root.

// psaAllows reports whether Pod Security at level admits the pod of
// service svc of m, with the reason when not.
func psaAllows(t *testing.T, m *Manifest, svc string, level psaapi.Level) (bool, string) {
	t.Helper()
	d, err := m.Deployment(svc)
	require.NoError(t, err)
	eval, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	require.NoError(t, err)
	res := psapolicy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()},
		&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec))
	return res.Allowed, res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

func TestATakenManifestsPodsRunHardened(t *testing.T) {
	m, err := Parse([]byte(`
lease: shop
services:
  - name: web
    image: nginx:1.27
  - name: api
    image: ghcr.io/example/api:1.0
    security:
      runAsNonRoot: true
      runAsUser: 10001
      capabilities: [NET_BIND_SERVICE]
      readOnlyRootFilesystem: true
`))
	require.NoError(t, err)
	taken := m.Hardened()
	require.Nil(t, m.Services[0].Security, "Hardened copies: the manifest as parsed is unchanged")

	web, err := taken.Deployment("web")
	require.NoError(t, err)
	pod := web.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	c := pod.Containers[0].SecurityContext
	require.NotNil(t, c)
	assert.False(t, *c.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.Capabilities.Drop)
	assert.Empty(t, c.Capabilities.Add)
	assert.Nil(t, pod.SecurityContext.RunAsNonRoot, "the image's user, unless the manifest says it can run as non-root")

	ok, why := psaAllows(t, taken, "web", psaapi.LevelBaseline)
	assert.True(t, ok, why)
	ok, why = psaAllows(t, taken, "web", psaapi.LevelRestricted)
	assert.False(t, ok, "a container that may run as root is not restricted")
	assert.Contains(t, why, "runAsNonRoot")
	ok, why = psaAllows(t, taken, "api", psaapi.LevelRestricted)
	assert.True(t, ok, why)
	api, err := taken.Deployment("api")
	require.NoError(t, err)
	assert.Equal(t, int64(10001), *api.Spec.Template.Spec.SecurityContext.RunAsUser)
	assert.Equal(t, []corev1.Capability{"NET_BIND_SERVICE"}, api.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add)
	assert.True(t, *api.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem)

	// A last-known-good manifest from before issue 35.4 has no security
	// section: its pods keep the template they ran with (a return to it
	// reuses its ReplicaSet).
	legacy, err := m.Deployment("web")
	require.NoError(t, err)
	assert.Nil(t, legacy.Spec.Template.Spec.SecurityContext)
	assert.Nil(t, legacy.Spec.Template.Spec.Containers[0].SecurityContext)

	// The section survives defaults and a JSON round trip (carried state).
	assert.Equal(t, taken.Services[1].Security, taken.WithDefaults().Services[1].Security)
	assert.NotNil(t, taken.WithDefaults().Services[0].Security)
}

func TestASecuritySectionIsValidatedNamingTheField(t *testing.T) {
	for _, tc := range []struct{ security, want string }{
		{"runAsUser: -1", "services[0].security.runAsUser: -1 is not a UID: use 0 to 2147483647"},
		{"runAsUser: 4294967296", "services[0].security.runAsUser: 4294967296 is not a UID"},
		{"runAsNonRoot: true, runAsUser: 0", "services[0].security.runAsUser: 0 is root, and runAsNonRoot is set"},
		{"capabilities: [CAP_NET_ADMIN]", `services[0].security.capabilities[0]: "CAP_NET_ADMIN": write it without CAP_, e.g. NET_ADMIN`},
		{"capabilities: [net_bind_service]", `services[0].security.capabilities[0]: "net_bind_service" is not a capability name`},
		{"capabilities: [ALL]", "services[0].security.capabilities[0]: ALL is every capability"},
		{"capabilities: [CHOWN, CHOWN]", "services[0].security.capabilities[1]: CHOWN is listed twice"},
		{"capabilities: [A1, A2, A3, A4, A5, A6, A7, A8, A9, B1, B2, B3, B4, B5, B6, B7, B8]", "services[0].security.capabilities: 17 capabilities: at most 16"},
		{"privileged: true", "services[0].security.privileged: unknown field; the fields here are capabilities, readOnlyRootFilesystem, runAsNonRoot, runAsUser"},
	} {
		t.Run(tc.security, func(t *testing.T) {
			_, err := Parse([]byte("lease: shop\nservices:\n  - name: web\n    image: nginx:1.27\n    security: {" + tc.security + "}\n"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The operator's bounds, checked before anything is written: a restricted
// provider refuses a manifest whose containers may run as root, naming
// the field and the fix, and nobody adds a capability the operator did
// not allow.
func TestTheOperatorsPodSecurityBoundsAManifestsSecurity(t *testing.T) {
	parse := func(security string) *Manifest {
		t.Helper()
		src := "lease: shop\nservices:\n  - name: web\n    image: nginx:1.27\n"
		if security != "" {
			src += "    security: " + security + "\n"
		}
		m, err := Parse([]byte(src))
		require.NoError(t, err)
		return m.Hardened()
	}
	for _, tc := range []struct {
		name, security string
		limits         Limits
		want           string // "" for accepted
	}{
		{"baseline, as the image says", "", Limits{}, ""},
		{"restricted, may run as root", "", Limits{PodSecurity: PodSecurityRestricted},
			"services[0].security.runAsNonRoot: this provider runs pods at the restricted Pod Security level, where a container may not run as root: set runAsNonRoot: true"},
		{"restricted, non-root", "{runAsNonRoot: true}", Limits{PodSecurity: PodSecurityRestricted}, ""},
		{"a web server's capabilities by default", "{capabilities: [NET_BIND_SERVICE, CHOWN, SETUID, SETGID]}", Limits{}, ""},
		{"NET_BIND_SERVICE by default", "{capabilities: [NET_BIND_SERVICE]}", Limits{}, ""},
		{"NET_ADMIN not allowed", "{capabilities: [NET_ADMIN]}", Limits{},
			"services[0].security.capabilities[0]: NET_ADMIN: this provider lets a container add only [NET_BIND_SERVICE CHOWN SETUID SETGID] (the operator's --allow-capabilities)"},
		{"CHOWN allowed by the operator", "{capabilities: [CHOWN]}", Limits{Capabilities: []string{"NET_BIND_SERVICE", "CHOWN"}}, ""},
		{"CHOWN allowed, but restricted", "{runAsNonRoot: true, capabilities: [CHOWN]}", Limits{PodSecurity: PodSecurityRestricted, Capabilities: []string{"CHOWN"}},
			"services[0].security.capabilities[0]: CHOWN: at the restricted Pod Security level a container may add only NET_BIND_SERVICE"},
		{"SYS_TIME allowed, but baseline", "{capabilities: [SYS_TIME]}", Limits{Capabilities: []string{"SYS_TIME"}},
			"services[0].security.capabilities[0]: SYS_TIME: at the baseline Pod Security level"},
		{"none allowed", "{capabilities: [NET_BIND_SERVICE]}", Limits{Capabilities: []string{}},
			"services[0].security.capabilities[0]: NET_BIND_SERVICE: this provider lets a container add only []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(tc.security).CheckLimits(tc.limits)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A manifest taken before its pods ran hardened (no security section)
	// is told why it is refused at restricted, and what to do.
	legacy, err := Parse([]byte("lease: shop\nservices:\n  - name: web\n    image: nginx:1.27\n"))
	require.NoError(t, err)
	err = legacy.CheckLimits(Limits{PodSecurity: PodSecurityRestricted})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].security.runAsNonRoot: this manifest was taken before its pods ran hardened")
	assert.NoError(t, Limits{Capabilities: []string{"NET_BIND_SERVICE", "CHOWN"}}.CheckCapabilities())
	for _, bad := range []string{"ALL", "CAP_CHOWN", "chown", strings.Repeat("A", 40)} {
		assert.Error(t, Limits{Capabilities: []string{bad}}.CheckCapabilities(), bad)
	}
}
