package devstack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one long-running program of the stack. Its PID is recorded in
// <run>/pids/<name>.pid; it is only ever stopped through that PID, after
// checking that the PID still runs the binary we started.
type process struct {
	name string
	bin  string
	args []string
	env  []string
	cred *syscall.Credential // run as this user (PostgreSQL, when the stack runs as root)
	// restart: run under a supervisor that starts it again when it exits
	// on its own, as a kubelet restarts a control plane's static pods
	// (kube-scheduler exits on purpose when it finds its cache corrupted,
	// which an API server outage can cause). Stop and Kill end the
	// supervisor and the process together.
	restart bool
}

// supervisor is the shell loop a restart process runs under: it starts
// the process, waits for it, and starts it again after a back-off of 1s
// doubling to 10s (reset after a minute's run). SIGTERM or SIGINT ends
// the loop and the process.
const supervisor = `child=
trap 'trap - TERM INT; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait; exit 0' TERM INT
delay=1
while :; do
  started=$SECONDS
  "$@" &
  child=$!
  wait "$child"
  rc=$?
  child=
  [ $((SECONDS - started)) -ge 60 ] && delay=1
  echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) exited (status $rc); restarting in ${delay}s, as a kubelet restarts a static pod"
  sleep "$delay" &
  wait $!
  [ "$delay" -lt 10 ] && delay=$((delay * 2))
done`

// command is what start runs for p: p itself, or its supervisor.
func (p process) command() (bin string, args []string, err error) {
	if !p.restart {
		return p.bin, p.args, nil
	}
	sh, err := exec.LookPath("bash")
	if err != nil {
		return "", nil, fmt.Errorf("%s restarts on exit under bash: %w", p.name, err)
	}
	if sh, err = filepath.EvalSymlinks(sh); err != nil {
		return "", nil, err
	}
	return sh, append([]string{"-c", supervisor, p.name, p.bin}, p.args...), nil
}

func (s *Stack) pidFile(name string) string { return filepath.Join(s.RunDir, "pids", name+".pid") }
func (s *Stack) logFile(name string) string { return filepath.Join(s.RunDir, "logs", name+".log") }

// start launches p detached from the caller (own process group, output to
// its log file) and records its PID.
func (s *Stack) start(p process) (int, error) {
	if err := os.MkdirAll(filepath.Dir(s.pidFile(p.name)), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(s.logFile(p.name)), 0o755); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(s.logFile(p.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339), p.bin, strings.Join(p.args, " "))

	bin, args, err := p.command()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin, args...)
	if n := niceness(); n > 0 {
		// A component runs at the default CPU priority, even when a test
		// at a lower one starts it (make test runs its tests at nice 10:
		// an extra cluster's API server is a server like the stack's, and
		// starved, it was not ready within a minute: local CI run 97).
		// nice, not a priority set after the start: every thread of the
		// process has its own, and the runtime starts threads at once. Not
		// allowed (not root), nice says so in the log and runs it anyway.
		if nice, err := exec.LookPath("nice"); err == nil {
			cmd = exec.Command(nice, append([]string{"-n", strconv.Itoa(-n), bin}, args...)...)
		}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = s.RunDir
	if p.cred != nil {
		cmd.Dir = "/" // another user need not reach the run directory
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while this process lives (a long test run), so a
	// dead component never lingers as a zombie that looks alive.
	go func() { _ = cmd.Wait() }()
	// The PID file: the PID, the binary it runs, the fingerprint, and
	// "group" when stop must signal the whole process group (the
	// supervisor and its process).
	record := strconv.Itoa(pid) + "\n" + bin + "\n" + p.fingerprint() + "\n"
	if p.restart {
		record += "group\n"
	}
	if err := os.WriteFile(s.pidFile(p.name), []byte(record), 0o644); err != nil {
		return pid, err
	}
	return pid, nil
}

// fingerprint identifies the command line, so a component whose flags
// changed since it was started is restarted by Up.
func (p process) fingerprint() string {
	h := sha256.New()
	fmt.Fprintln(h, p.bin)
	for _, a := range append(append([]string{}, p.args...), p.env...) {
		fmt.Fprintln(h, a)
	}
	if p.restart {
		fmt.Fprintln(h, "restart")
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pidRecord is line i of name's PID file (0 the PID, 1 the binary, 2 the
// fingerprint, 3 "group" for a supervised process), "" if it has none.
func (s *Stack) pidRecord(name string, i int) string {
	b, err := os.ReadFile(s.pidFile(name))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if i >= len(lines) {
		return ""
	}
	return lines[i]
}

// recordedFingerprint is the fingerprint written when name was started.
func (s *Stack) recordedFingerprint(name string) string { return s.pidRecord(name, 2) }

// running reports the PID of name if its recorded process is alive and is
// still the binary that was started under that PID.
func (s *Stack) running(name string) (int, bool) {
	pid, err := strconv.Atoi(s.pidRecord(name, 0))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if !alive(pid) {
		return pid, false
	}
	if bin := s.pidRecord(name, 1); bin != "" {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		exe = strings.TrimSuffix(exe, " (deleted)")
		if err != nil || exe != bin && !startingUnderNice(exe) {
			return pid, false // the PID was reused by something else
		}
	}
	return pid, true
}

// alive is true for a live, non-zombie process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// stop ends name's recorded process: SIGTERM, then SIGKILL after grace (a
// grace of 0: SIGKILL at once). A missing or stale PID file is not an
// error.
func (s *Stack) stop(name string, grace time.Duration) error {
	pid, ok := s.running(name)
	defer os.Remove(s.pidFile(name))
	if !ok {
		return nil
	}
	// A supervised process is stopped with its supervisor: the signal goes
	// to the process group (its own, started with Setpgid), and stop waits
	// until no member is left.
	target, gone := pid, func() bool { return !alive(pid) }
	if s.signalsGroup(name) {
		target, gone = -pid, func() bool { return !alive(pid) && !groupAlive(pid) }
	}
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s (pid %d): %w", name, pid, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if gone() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(target, syscall.SIGKILL)
	for i := 0; i < 100 && !gone(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		return fmt.Errorf("stop %s: pid %d still alive after SIGKILL", name, pid)
	}
	return nil
}

// signalsGroup is true when name's PID file says to signal its process
// group (a supervised process).
func (s *Stack) signalsGroup(name string) bool { return s.pidRecord(name, 3) == "group" }

// groupAlive is true while a live, non-zombie process is in process group
// pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// tail returns the last n bytes of name's log, for error messages.
func (s *Stack) tail(name string, n int64) string {
	f, err := os.Open(s.logFile(name))
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// PID is name's recorded PID while it runs (a component of the stack, or
// a process started beside it such as StartControllerManager's).
func (s *Stack) PID(name string) (int, bool) { return s.running(name) }

// niceness is this process's nice value (0 by default, 10 under make
// test's tests).
func niceness() int {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - prio // the system call's value is 20 - nice
}

// startingUnderNice reports whether exe is nice, which a component started
// from a lower priority runs under until it executes the component.
func startingUnderNice(exe string) bool {
	nice, err := exec.LookPath("nice")
	if err != nil {
		return false
	}
	if resolved, err := filepath.EvalSymlinks(nice); err == nil {
		nice = resolved
	}
	return exe == nice
}
