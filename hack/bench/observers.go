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
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
)

// observerShare (issue 22.4) makes the same change of the same idle
// leases (each one's ReplicaSet scaled to 0 by hand, then back to 1) with
// 1, then 3, workers on the fleet's task queue, and counts what the
// observers did: the observations they sent the leases' workflows, by
// result, and the workers' apiserver requests for the leases in the window
// (their membership renewals apart, as the idle line counts them). Both
// should be the same for 3 workers as for 1: each lease is observed by one
// of them. The burst of workers joining (each sends the leases it takes
// over once, answered "known") is measured apart, before the window
// (issue 40.1: the window counted part of it).
func (f *fleet) observerShare(ctx context.Context, kc kubernetes.Interface, leases []string) error {
	type row struct {
		workers, reqs int
		sends         map[string]int
		took          time.Duration
		rss           []float64 // each worker's, at the window's end
	}
	var rows []row
	addrs := []string{f.addr}
	pids := []int{f.worker.Process.Pid}
	var extra []*exec.Cmd
	defer func() {
		for _, c := range extra {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for _, k := range []int{1, 3} {
		joined := len(addrs) < k
		joinFrom := time.Now()
		before := sendsByResult(addrs)
		for len(addrs) < k {
			cmd, addr, err := f.spawnWorker(fmt.Sprintf("bench-observer-%d", len(addrs)))
			if err != nil {
				return err
			}
			extra, addrs, pids = append(extra, cmd), append(addrs, addr), append(pids, cmd.Process.Pid)
		}
		for _, a := range addrs {
			if err := waitMetric(a, "deployflow_observer_members", k, time.Minute); err != nil {
				return err
			}
		}
		// The membership change settles: nothing sent for 5 s.
		if err := waitQuiet(addrs, total(sendsByResult(addrs)), 0, 5*time.Second, 5*time.Minute); err != nil {
			return err
		}
		if joined {
			burst := diffSends(before, sendsByResult(addrs))
			fmt.Fprintf(out, "\nobservers: %d workers joining %d leases sent %d observations (%s) in %s (until 5 s without a send)\n",
				k-1, len(f.started), total(burst), resultsLine(burst), round(time.Since(joinFrom)-5*time.Second))
		}
		start := sendsByResult(addrs)
		from := time.Now()
		for _, replicas := range []int32{0, 1} {
			base := total(sendsByResult(addrs))
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
		reqs, err := f.requests(from, to)
		if err != nil {
			return err
		}
		r := row{workers: k, sends: diffSends(start, sendsByResult(addrs)), reqs: reqs, took: to.Sub(from)}
		for _, pid := range pids {
			r.rss = append(r.rss, procStatusMiB(pid, "VmRSS:"))
		}
		rows = append(rows, r)
	}
	changes := 2 * len(leases)
	fmt.Fprintf(out, "\nobservers: %d changes (%d idle leases of %d, each one's ReplicaSet scaled to 0 by hand and back to 1), observed by 1 then 3 workers on one task queue:\n",
		changes, len(leases), len(f.started))
	fmt.Fprintf(out, "%-8s %6s %9s %6s %9s %9s %6s %11s %14s %9s  %s\n", "workers", "sent", "accepted", "known", "deferred", "rejected", "error",
		"sent/change", "lease requests", "window", "RSS per worker (MiB)")
	for _, r := range rows {
		var rss []string
		for _, m := range r.rss {
			rss = append(rss, fmt.Sprintf("%.0f", m))
		}
		fmt.Fprintf(out, "%-8d %6d %9d %6d %9d %9d %6d %11.2f %14d %9s  %s\n", r.workers, total(r.sends), r.sends[observe.SentAccepted],
			r.sends[observe.SentKnown], r.sends[observe.SentDeferred], r.sends[observe.SentRejected], r.sends[observe.SentError],
			float64(total(r.sends))/float64(max(changes, 1)), r.reqs, round(r.took), strings.Join(rss, " "))
	}
	if len(rows) == 2 && total(rows[0].sends) > 0 {
		reqs := "-" // none with 1 worker
		if rows[0].reqs > 0 {
			reqs = fmt.Sprintf("%.2f", float64(rows[1].reqs)/float64(rows[0].reqs))
		}
		fmt.Fprintf(out, "%-8s %6.2f %9s %6s %9s %9s %6s %11s %14s   (target: 1.00, independent of the number of workers)\n", "3 / 1",
			float64(total(rows[1].sends))/float64(total(rows[0].sends)), "", "", "", "", "", "", reqs)
	}
	return nil
}

// sendsByResult sums the workers' observations sent, by result, less
// those to a lease with no workflow in the bench's Temporal namespace
// (another user's of the cluster).
func sendsByResult(addrs []string) map[string]int {
	out := map[string]int{}
	for _, a := range addrs {
		for _, m := range sendsLine.FindAllStringSubmatch(scrape(a), -1) {
			if m[1] == observe.SentNoWorkflow {
				continue
			}
			n, _ := strconv.Atoi(m[2])
			out[m[1]] += n
		}
	}
	return out
}

func diffSends(from, to map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range to {
		if d := v - from[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func total(sends map[string]int) int {
	n := 0
	for _, v := range sends {
		n += v
	}
	return n
}

func resultsLine(sends map[string]int) string {
	var parts []string
	for _, r := range []string{observe.SentAccepted, observe.SentKnown, observe.SentDeferred, observe.SentRejected, observe.SentError} {
		if sends[r] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", sends[r], r))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

var sendsLine = regexp.MustCompile(`(?m)^deployflow_observer_sends_total\{result="([a-z_]+)"\} (\d+)$`)

// waitQuiet waits until the workers have sent at least want observations
// more than start, and then none for quiet.
func waitQuiet(addrs []string, start, want int, quiet, limit time.Duration) error {
	last, since := start, time.Now()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		n := total(sendsByResult(addrs))
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
		// Read again and retry when the controller-manager wrote the
		// ReplicaSet in between (make bench-scale's bursts met it: "the
		// object has been modified").
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := kc.AppsV1().ReplicaSets(ns).GetScale(ctx, rs.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = kc.AppsV1().ReplicaSets(ns).UpdateScale(ctx, rs.Name, s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
