package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployflow/deployflow/k8s/kube"
)

// The local data plane (issue 38.1): the fake nodes' pods answer requests.
// kwok hands pod IPs out of PodCIDR; `devstack serve-pods` makes that range
// local to this machine (a `local` route on the loopback device: the
// kernel's own, no interface added) and, for each Ready pod, listens on its
// IP and each TCP port its containers declare, answering with the pod's
// name and the container's image. A request to a Service's endpoints (its
// EndpointSlices, which refuse loopback addresses, hence not 127/8) then
// reaches a "pod" of the version it belongs to. It answers only this
// machine: a connection from any other address is closed unanswered.
//
// The route needs CAP_NET_ADMIN (CI runs as root). Without it the data
// plane is off, says why on its health endpoint, and the tests that need
// it skip outside CI (DataPlaneOn).

// DataPlane is the component that serves the fake pods.
const DataPlane = "dataplane"

// dataPlaneAddr is its health endpoint: "on", or "off: <why>".
const dataPlaneAddr = "127.0.0.1:16480"

// DataPlaneURL is the health endpoint's URL.
const DataPlaneURL = "http://" + dataPlaneAddr + "/healthz"

// Pod response headers: who answered.
const (
	HeaderPod   = "X-Deployflow-Pod"
	HeaderImage = "X-Deployflow-Image"
)

func (s *Stack) dataPlaneComponent() component {
	return component{
		process: process{name: DataPlane, bin: filepath.Join(s.RepoDir, "bin", "devstack"), args: []string{
			"serve-pods", "--kubeconfig=" + s.Kubeconfig(), "--pod-cidr=" + PodCIDR, "--listen=" + dataPlaneAddr,
		}},
		before: func(context.Context) error {
			if _, err := os.Stat(filepath.Join(s.RepoDir, "bin", "devstack")); err != nil {
				return fmt.Errorf("the data plane runs bin/devstack serve-pods: build it first (make build): %w", err)
			}
			return nil
		},
		ready:   httpOK(DataPlaneURL, ""),
		timeout: 30 * time.Second,
	}
}

// DataPlaneOn reports whether the stack's data plane serves pods, and if
// not, why.
func DataPlaneOn(ctx context.Context) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, DataPlaneURL, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, "the data plane is not running: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	state := strings.TrimSpace(string(b))
	return state == "on", state
}

// ServePods is `devstack serve-pods`: the data plane until ctx ends. It
// adds the local route for cidr (and removes it on the way out), then
// serves every Ready pod with an IP in cidr.
func ServePods(ctx context.Context, kubeconfig, cidr, listen string, logf func(string, ...any)) error {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("--pod-cidr: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	state := "on"
	if out, err := exec.CommandContext(ctx, "ip", "route", "replace", "local", cidr, "dev", "lo").CombinedOutput(); err != nil {
		state = fmt.Sprintf("off: making %s local to this machine (ip route replace local %s dev lo) needs CAP_NET_ADMIN: %v %s",
			cidr, cidr, err, strings.TrimSpace(string(out)))
		logf("%s", state)
	} else {
		defer func() {
			_ = exec.Command("ip", "route", "del", "local", cidr, "dev", "lo").Run()
		}()
	}
	health, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	go func() {
		_ = http.Serve(health, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, state) }))
	}()
	defer health.Close()
	if state != "on" {
		<-ctx.Done()
		return nil
	}

	p := &podServer{prefix: prefix, logf: logf, serving: map[string]*podListener{}}
	defer p.closeAll()
	factory := informers.NewSharedInformerFactory(kube, 0)
	pods := factory.Core().V1().Pods().Informer()
	_, err = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.sync(obj) },
		UpdateFunc: func(_, obj any) { p.sync(obj) },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.serve(string(pod.UID), nil)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// podServer holds one listener per Ready pod's IP and port.
type podServer struct {
	prefix  netip.Prefix
	logf    func(string, ...any)
	mu      sync.Mutex
	serving map[string]*podListener // by ip:port
}

// podListener is one pod's port: who it answers as.
type podListener struct {
	uid, pod, image string
	srv             *http.Server
}

// endpoint is one address a pod serves, and as whom.
type endpoint struct{ uid, pod, image string }

// endpoints is what pod serves: if it is Ready with an IP in the range,
// each TCP port of each container, by ip:port.
func (p *podServer) endpoints(pod *corev1.Pod) map[string]endpoint {
	want := map[string]endpoint{}
	if pod.DeletionTimestamp != nil || !kube.PodReady(pod) {
		return want
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !p.prefix.Contains(ip) {
		return want
	}
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
				continue
			}
			addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(port.ContainerPort)))
			want[addr] = endpoint{uid: string(pod.UID), pod: pod.Namespace + "/" + pod.Name, image: c.Image}
		}
	}
	return want
}

// sync serves what obj, a pod, serves now.
func (p *podServer) sync(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		p.serve(string(pod.UID), p.endpoints(pod))
	}
}

// serve makes the pod of uid serve want, and nothing else: its addresses
// no longer wanted close, new ones open (an address another pod held, its
// IP handed on, is taken over).
func (p *podServer) serve(uid string, want map[string]endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, l := range p.serving {
		if e, ok := want[addr]; (l.uid == uid && (!ok || e.image != l.image)) || (ok && l.uid != uid) {
			_ = l.srv.Close()
			delete(p.serving, addr)
		}
	}
	addrs := make([]string, 0, len(want))
	for addr := range want {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		if _, ok := p.serving[addr]; ok {
			continue
		}
		e := want[addr]
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			p.logf("serve %s for %s: %v", addr, e.pod, err)
			continue
		}
		srv := &http.Server{Handler: answer(e), ReadHeaderTimeout: 10 * time.Second}
		p.serving[addr] = &podListener{uid: e.uid, pod: e.pod, image: e.image, srv: srv}
		go func() {
			if err := srv.Serve(localOnly{ln, p.prefix}); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.logf("serve %s: %v", addr, err)
			}
		}()
	}
}

func (p *podServer) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, l := range p.serving {
		_ = l.srv.Close()
		delete(p.serving, addr)
	}
}

// answer is a pod's reply to any request: its name and image, as headers
// and as the body (any path answers 200, an HTTP probe's too).
func answer(e endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(HeaderPod, e.pod)
		w.Header().Set(HeaderImage, e.image)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "pod %s image %s\n", e.pod, e.image)
	})
}

// localOnly closes, unanswered, every connection that does not come from
// this machine: from a loopback address or one of the pod range (the
// addresses this machine dials the pods from).
type localOnly struct {
	net.Listener
	prefix netip.Prefix
}

func (l localOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ap, perr := netip.ParseAddrPort(c.RemoteAddr().String()); perr == nil {
			if ip := ap.Addr().Unmap(); ip.IsLoopback() || l.prefix.Contains(ip) {
				return c, nil
			}
		}
		_ = c.Close()
	}
}
