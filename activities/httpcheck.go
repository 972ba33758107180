package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/internal/analysis"
)

// HTTPCheckInput is one measurement of an HTTP check analysis.
type HTTPCheckInput struct {
	// Namespace is the lease's: its Services may always be checked.
	Namespace string `json:"namespace"`
	URL       string `json:"url"`
	JSONField string `json:"jsonField,omitempty"`
	// Judge: judge the measurement by these conditions (Measurement.Phase).
	Judge *analysis.Conditions `json:"judge,omitempty"`
}

// Where an HTTP check's target is decided (issue 20.2): by the address the
// worker dials, never by a name. A lease's check may reach
//
//   - its own Services, named <svc>, <svc>.<ns>, <svc>.<ns>.svc or
//     <svc>.<ns>.svc.<cluster domain> with <ns> the lease's namespace: the
//     Service is looked up there and its ClusterIP is dialled (no DNS);
//   - an address inside one of the operator's CIDRs (--http-check-allow);
//   - a name the operator allows (exact, or *.suffix), resolved by the
//     worker, each address checked before it is dialled: loopback,
//     link-local (the cloud's metadata service), unspecified and multicast
//     addresses are refused unless an operator CIDR holds them.
//
// Every redirect is checked the same way, no proxy from the environment is
// used, and only a number is reported back.

// httpTarget is a host an HTTP check may dial, with the addresses it may
// dial for it.
type httpTarget struct {
	addrs []netip.Addr
}

// forbiddenUnlessListed are addresses no check dials unless an operator
// CIDR holds them: anything but global unicast. Loopback, link-local (the
// cloud's metadata service), private and shared (CGNAT: Alibaba's metadata
// at 100.100.100.200) ranges, and IPv6 forms that carry an IPv4 address
// (NAT64, 6to4, IPv4-compatible), so a name the operator allows cannot
// resolve into the cluster's or the provider's own network.
func forbiddenUnlessListed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64
	netip.MustParsePrefix("64:ff9b:1::/48"), // local NAT64
	netip.MustParsePrefix("2002::/16"),      // 6to4
	netip.MustParsePrefix("::/96"),          // IPv4-compatible
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// httpCheckPolicy decides what a lease's check may dial.
type httpCheckPolicy struct {
	a         *Activities
	namespace string
	cidrs     []netip.Prefix
	names     []string // exact names and *.suffix patterns
}

func (a *Activities) httpCheckPolicy(namespace string) *httpCheckPolicy {
	p := &httpCheckPolicy{a: a, namespace: namespace}
	for _, s := range a.HTTPCheckAllow {
		s = strings.ToLower(strings.TrimSpace(s))
		if pre, err := netip.ParsePrefix(s); err == nil {
			if pre.Addr().Is4In6() && pre.Bits() >= 96 { // ::ffff:a.b.c.d/n is a.b.c.d/n-96
				pre = netip.PrefixFrom(pre.Addr().Unmap(), pre.Bits()-96)
			}
			p.cidrs = append(p.cidrs, pre.Masked())
		} else if ip, err := netip.ParseAddr(s); err == nil {
			ip = ip.Unmap()
			p.cidrs = append(p.cidrs, netip.PrefixFrom(ip, ip.BitLen()))
		} else if s != "" {
			p.names = append(p.names, strings.TrimSuffix(s, "."))
		}
	}
	return p
}

func (p *httpCheckPolicy) listed(ip netip.Addr) bool {
	for _, c := range p.cidrs {
		if c.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// leaseService is the Service a host names in the lease's namespace, or
// "" when it names none.
func (p *httpCheckPolicy) leaseService(host string) string {
	domain := p.a.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	parts := strings.Split(host, ".")
	switch {
	case len(parts) == 1:
	case len(parts) == 2 && parts[1] == p.namespace:
	case len(parts) == 3 && parts[1] == p.namespace && parts[2] == "svc":
	case len(parts) > 3 && parts[1] == p.namespace && parts[2] == "svc" && strings.Join(parts[3:], ".") == domain:
	default:
		return ""
	}
	if len(validation.IsDNS1035Label(parts[0])) > 0 {
		return ""
	}
	return parts[0]
}

// target decides whether host may be dialled, and at which addresses.
func (p *httpCheckPolicy) target(ctx context.Context, host string) (*httpTarget, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if !p.listed(ip) {
			return nil, fmt.Errorf("%s is not in the worker's --http-check-allow CIDRs", host)
		}
		return &httpTarget{addrs: []netip.Addr{ip}}, nil
	}
	if svc := p.leaseService(host); svc != "" && p.a.Kube != nil {
		s, err := p.a.Kube.CoreV1().Services(p.namespace).Get(ctx, svc, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && p.namedByOperator(host):
			return p.resolved(ctx, host) // a one-label name the operator allows
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("the lease has no Service %s", svc)
		case err != nil:
			return nil, fmt.Errorf("look up Service %s/%s: %w", p.namespace, svc, err)
		}
		t := &httpTarget{}
		for _, c := range s.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(c); err == nil {
				t.addrs = append(t.addrs, ip)
			}
		}
		if len(t.addrs) == 0 {
			return nil, fmt.Errorf("Service %s has no ClusterIP (headless or ExternalName): check a Service with one", svc)
		}
		return t, nil
	}
	if !p.namedByOperator(host) {
		return nil, fmt.Errorf("%s is not one of the lease's Services (<service>.%s) nor allowed by the worker's --http-check-allow", host, p.namespace)
	}
	return p.resolved(ctx, host)
}

// resolved is a name the operator allows, at the addresses it resolves to
// that a check may reach.
func (p *httpCheckPolicy) resolved(ctx context.Context, host string) (*httpTarget, error) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	t := &httpTarget{}
	for _, ip := range ips {
		if forbiddenUnlessListed(ip) && !p.listed(ip) {
			continue
		}
		t.addrs = append(t.addrs, ip.Unmap())
	}
	if len(t.addrs) == 0 {
		return nil, fmt.Errorf("%s resolves only to addresses no check may reach (loopback, link-local, metadata) unless --http-check-allow lists their CIDR", host)
	}
	return t, nil
}

func (p *httpCheckPolicy) namedByOperator(host string) bool {
	for _, n := range p.names {
		if n == host || (strings.HasPrefix(n, "*.") && strings.HasSuffix(host, n[1:])) {
			return true
		}
	}
	return false
}

// dial connects to one of addr's allowed addresses; the socket's own
// address is checked again just before it connects.
func (p *httpCheckPolicy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	t, err := p.target(ctx, host)
	if err != nil {
		return nil, notAllowedTarget{err}
	}
	allowed := map[netip.Addr]bool{}
	for _, ip := range t.addrs {
		allowed[ip] = true
	}
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allowed[ap.Addr().Unmap()] {
			return notAllowedTarget{fmt.Errorf("refused to dial %s", address)}
		}
		return nil
	}}
	var last error
	for _, ip := range t.addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// notAllowedTarget is a target the policy refused: the check is not made
// (inconclusive), not retried.
type notAllowedTarget struct{ error }

func (e notAllowedTarget) Unwrap() error { return e.error }

// DefaultClusterDomain is the cluster's DNS domain unless --cluster-domain
// says otherwise.
const DefaultClusterDomain = "cluster.local"

// maxCheckBody bounds what an HTTP check reads of an answer.
const maxCheckBody = 1 << 20

// MeasureHTTP GETs the check's URL: the result is the status code, or,
// with JSONField, the number at that dotted path of the JSON answer (true
// 1, false 0). An answer without that field, or not JSON, has no value
// (inconclusive); an unreachable URL is an error (retried, then
// inconclusive): what cannot be measured is never a failure.
func (a *Activities) MeasureHTTP(ctx context.Context, in HTTPCheckInput) (*Measurement, error) {
	m, err := a.measureHTTP(ctx, in)
	return judged(in.Judge, m, err)
}

func (a *Activities) measureHTTP(ctx context.Context, in HTTPCheckInput) (*Measurement, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return &Measurement{Message: "not checked: the URL is not an http(s) URL"}, nil
	}
	policy := a.httpCheckPolicy(in.Namespace)
	if _, err := policy.target(ctx, req.URL.Hostname()); err != nil {
		return &Measurement{Message: "not checked: " + err.Error()}, nil
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:       nil, // never the environment's proxy: the address dialled is the one checked
			DialContext: policy.dial, DisableKeepAlives: true,
			TLSHandshakeTimeout: 5 * time.Second, ResponseHeaderTimeout: 5 * time.Second,
		},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return notAllowedTarget{errors.New("more than 5 redirects")}
			}
			if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
				return notAllowedTarget{fmt.Errorf("redirected to a %s URL", r.URL.Scheme)}
			}
			if _, err := policy.target(r.Context(), r.URL.Hostname()); err != nil {
				return notAllowedTarget{fmt.Errorf("redirected: %w", err)}
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	var refused notAllowedTarget
	if errors.As(err, &refused) {
		return &Measurement{Message: "not checked: " + refused.Error()}, nil
	}
	if err != nil {
		// The URL only, not what answered: a tenant reads this message.
		return nil, fmt.Errorf("GET %s: no answer", req.URL.Redacted())
	}
	defer resp.Body.Close()
	if in.JSONField == "" {
		v := float64(resp.StatusCode)
		return &Measurement{Value: &v, Message: fmt.Sprintf("status %d", resp.StatusCode)}, nil
	}
	var body any
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCheckBody)).Decode(&body); err != nil {
		return &Measurement{Message: fmt.Sprintf("status %d, not JSON", resp.StatusCode)}, nil
	}
	for _, k := range strings.Split(in.JSONField, ".") {
		m, ok := body.(map[string]any)
		if !ok {
			return &Measurement{Message: fmt.Sprintf("status %d: no field %s in the answer", resp.StatusCode, in.JSONField)}, nil
		}
		if body, ok = m[k]; !ok {
			return &Measurement{Message: fmt.Sprintf("status %d: no field %s in the answer", resp.StatusCode, in.JSONField)}, nil
		}
	}
	var v float64
	switch x := body.(type) {
	case float64:
		v = x
	case bool:
		if x {
			v = 1
		}
	default:
		// Never echoed: a check must not make the worker fetch a page and
		// print it into status, notifications and history.
		return &Measurement{Message: fmt.Sprintf("status %d: %s is not a number or a boolean", resp.StatusCode, in.JSONField)}, nil
	}
	return &Measurement{Value: &v, Message: fmt.Sprintf("%s = %g", in.JSONField, v)}, nil
}
