// Command cpusample measures where a machine's CPU goes while a command
// runs: every process's CPU time (utime+stime, from /proc), sampled every
// -every, summed by program, the top printed when the command ends, with
// the machine's busy and idle seconds over the same span. A process that
// lives shorter than one sample is missed (the machine totals count it).
//
//	go run ./hack/cpusample -- make test
//
// docs/testing.md ("Where the live phase's CPU goes") quotes its output.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

type proc struct {
	program string
	first   float64 // CPU seconds when first seen (kept only for processes older than the sampling)
	last    float64
}

func main() {
	every := flag.Duration("every", time.Second, "how often to sample")
	top := flag.Int("top", 25, "how many programs to print")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: cpusample [-every 1s] [-top 25] -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	seen := map[string]*proc{} // by pid and start time
	busy0, idle0 := machine()
	sample := func(initial bool) {
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			if _, err := strconv.Atoi(d.Name()); err != nil {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
			if err != nil {
				continue
			}
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
			if len(f) < 20 {
				continue
			}
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			cpu := (ut + st) / clockTicks
			key := d.Name() + "/" + f[19]
			p := seen[key]
			if p == nil {
				p = &proc{program: program(d.Name())}
				if initial {
					p.first = cpu
				}
				seen[key] = p
			}
			p.last = cpu
		}
	}
	sample(true)
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "cpusample:", err)
		os.Exit(1)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(*every)
	var err error
loop:
	for {
		select {
		case err = <-done:
			break loop
		case <-tick.C:
			sample(false)
		}
	}
	sample(false)
	busy1, idle1 := machine()
	by := map[string]float64{}
	var total float64
	for _, p := range seen {
		by[p.program] += p.last - p.first
		total += p.last - p.first
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	fmt.Fprintf(os.Stderr, "\ncpusample: CPU seconds by program\n")
	for i, n := range names {
		if i == *top || by[n] < 0.05 {
			break
		}
		fmt.Fprintf(os.Stderr, "%9.1f  %s\n", by[n], n)
	}
	fmt.Fprintf(os.Stderr, "%9.1f  (every process sampled)\ncpusample: machine busy %.0f s, idle %.0f s\n", total, busy1-busy0, idle1-idle0)
	if err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			os.Exit(exit.ExitCode())
		}
		os.Exit(1)
	}
}

// program names a process by its executable: a Go test binary by its
// package (NAME.test), an extra cluster's kube-apiserver apart from the
// stack's own.
func program(pid string) string {
	cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
	if err != nil || len(cmdline) == 0 {
		comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		return "[" + strings.TrimSpace(string(comm)) + "]"
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if f := strings.Fields(args[0]); len(f) > 0 {
		args[0] = f[0] // a title a process set itself ("postgres: temporal ... idle")
	}
	name := strings.TrimSuffix(filepath.Base(args[0]), ":")
	if strings.Contains(string(cmdline), "--etcd-prefix=/deployflow-cluster-") {
		name += " (extra clusters)"
	}
	return name
}

// machine is the machine's busy and idle CPU seconds since boot
// (/proc/stat; idle includes iowait).
func machine() (busy, idle float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])[1:]
	for i, v := range f {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 {
			idle += n
		} else {
			busy += n
		}
	}
	return busy / clockTicks, idle / clockTicks
}
