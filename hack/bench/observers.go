package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
)

// observerShare (issue 22.4) makes the same change of the same idle
// leases (each one's ReplicaSet scaled to 0 by hand, then back to 1) with
// 1, then 3, workers on the fleet's task queue, and counts what the
// observers did: the observations they sent the leases' workflows, and all
// the workers' apiserver requests in the window. Both should be the same
// for 3 workers as for 1: each lease is observed by one of them.
func (f *fleet) observerShare(ctx context.Context, kc kubernetes.Interface, leases []string) error {
	type row struct {
		workers, sent, accepted, reqs int
		took                          time.Duration
	}
	var rows []row
	addrs := []string{f.addr}
	var extra []*exec.Cmd
	defer func() {
		for _, c := range extra {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for _, k := range []int{1, 3} {
		for len(addrs) < k {
			cmd, addr, err := f.spawnWorker(fmt.Sprintf("bench-observer-%d", len(addrs)))
			if err != nil {
				return err
			}
			extra, addrs = append(extra, cmd), append(addrs, addr)
		}
		for _, a := range addrs {
			if err := waitMetric(a, "deployflow_observer_members", k, time.Minute); err != nil {
				return err
			}
		}
		time.Sleep(5 * time.Second) // the re-observation of a membership change settles
		sent0, acc0 := observerSends(addrs)
		from := time.Now()
		for _, replicas := range []int32{0, 1} {
			base, _ := observerSends(addrs)
			for _, id := range leases {
				if err := scaleService(ctx, kc, id, replicas); err != nil {
					return err
				}
			}
			if err := waitScaled(ctx, kc, leases, replicas, 2*time.Minute); err != nil {
				return err
			}
			if err := waitQuiet(addrs, base, len(leases), 3*time.Second, 2*time.Minute); err != nil {
				return err
			}
		}
		to := time.Now()
		sent1, acc1 := observerSends(addrs)
		reqs, err := f.requests(from, to)
		if err != nil {
			return err
		}
		rows = append(rows, row{workers: k, sent: sent1 - sent0, accepted: acc1 - acc0, reqs: reqs, took: to.Sub(from)})
	}
	fmt.Fprintf(out, "\nobservers: %d idle leases, each one's ReplicaSet scaled to 0 by hand and back to 1, observed by 1 then 3 workers on one task queue:\n", len(leases))
	fmt.Fprintf(out, "%-10s %18s %12s %24s %10s\n", "workers", "observations sent", "accepted", "apiserver requests (all)", "window")
	for _, r := range rows {
		fmt.Fprintf(out, "%-10d %18d %12d %24d %10s\n", r.workers, r.sent, r.accepted, r.reqs, round(r.took))
	}
	if len(rows) == 2 && rows[0].sent > 0 {
		fmt.Fprintf(out, "%-10s %18.2f %12s %24.2f   (target: 1.00, independent of the number of workers)\n", "3 / 1",
			float64(rows[1].sent)/float64(rows[0].sent), "", float64(rows[1].reqs)/float64(max(rows[0].reqs, 1)))
	}
	return nil
}

var sendsLine = regexp.MustCompile(`(?m)^deployflow_observer_sends_total\{result="([a-z_]+)"\} (\d+)$`)

// observerSends sums the workers' observations sent to a workflow of a
// lease (not those to a lease with none in the bench's Temporal
// namespace: another user's of the cluster), and those accepted.
func observerSends(addrs []string) (sent, accepted int) {
	for _, a := range addrs {
		for _, m := range sendsLine.FindAllStringSubmatch(scrape(a), -1) {
			if m[1] == observe.SentNoWorkflow {
				continue
			}
			n, _ := strconv.Atoi(m[2])
			sent += n
			if m[1] == "accepted" {
				accepted += n
			}
		}
	}
	return sent, accepted
}

// waitQuiet waits until the workers have sent at least want observations
// more than start, and then none for quiet.
func waitQuiet(addrs []string, start, want int, quiet, limit time.Duration) error {
	last, since := start, time.Now()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		n, _ := observerSends(addrs)
		if n != last {
			last, since = n, time.Now()
			continue
		}
		if n-start >= want && time.Since(since) >= quiet {
			return nil
		}
	}
	var results []string
	for _, a := range addrs {
		results = append(results, sendsLine.FindAllString(scrape(a), -1)...)
	}
	return fmt.Errorf("the observers sent %d observations in %s, want at least %d (%v)", last-start, limit, want, results)
}

// waitScaled waits until every lease's web ReplicaSets have n available
// replicas: the change the observers are to see has happened.
func waitScaled(ctx context.Context, kc kubernetes.Interface, leases []string, n int32, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, id := range leases {
		for {
			list, err := kc.AppsV1().ReplicaSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{LabelSelector: manifest.ServiceLabel + "=web"})
			var avail int32
			for _, rs := range list.Items {
				avail += rs.Status.AvailableReplicas
			}
			if err == nil && avail == n {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("lease %s: web has %d available replicas, not %d, after %s", id, avail, n, limit)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func waitMetric(addr, name string, want int, limit time.Duration) error {
	re := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(scrape(addr)); m != nil && m[1] == strconv.Itoa(want) {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("worker %s: %s never %d", addr, name, want)
}

func scrape(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// scaleService sets lease id's web ReplicaSets to n, as kubectl scale rs.
func scaleService(ctx context.Context, kc kubernetes.Interface, id string, n int32) error {
	ns := manifest.Namespace(id)
	list, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: manifest.ServiceLabel + "=web"})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return errors.New("lease " + id + ": no ReplicaSet of web")
	}
	for _, rs := range list.Items {
		s, err := kc.AppsV1().ReplicaSets(ns).GetScale(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		if _, err := kc.AppsV1().ReplicaSets(ns).UpdateScale(ctx, rs.Name, s, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
