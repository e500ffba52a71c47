package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// This test binary is also the launcher: the package's init runs it when
// Wrap re-executes /proc/self/exe. TestMain builds the attack suite's
// server (./attacker) once, unless attackerEnv names a built one (the
// unprivileged re-run of TestAttacks, as nobody, gets it so).

const attackerEnv = "SNODOD_SANDBOX_ATTACKER"

// attackerPath is the built attacker.
var attackerPath string

func TestMain(m *testing.M) {
	attackerPath = os.Getenv(attackerEnv)
	cleanup := func(int) {}
	if attackerPath == "" {
		dir, err := os.MkdirTemp("", "snodod-sandbox-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		attackerPath = filepath.Join(dir, "attacker")
		out, err := exec.Command("go", "build", "-o", attackerPath, "github.com/snodod/snodod/internal/sandbox/attacker").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build the attacker: %v\n%s", err, out)
			_ = os.RemoveAll(dir)
			os.Exit(2)
		}
		cleanup = func(int) { _ = os.RemoveAll(dir) }
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(cleanup))
}

// skipOrFail skips, or under CI=true (where every part of the suite must
// run) fails.
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a skipped sandbox test is a failure)")
	}
	t.Skip(msg)
}

// needNamespaces skips (or fails under CI) where the kernel gives no
// namespaces to this user.
func needNamespaces(t *testing.T) {
	t.Helper()
	if k := Probe(); !k.Namespaces || !k.View {
		skipOrFail(t, "this kernel gives no mount and PID namespaces here: "+k.Detail)
	}
}

// needLandlock skips (or fails under CI) below Landlock ABI abi.
func needLandlock(t *testing.T, abi int) {
	t.Helper()
	if k := Probe(); k.LandlockABI < abi {
		skipOrFail(t, fmt.Sprintf("Landlock ABI %d < %d", k.LandlockABI, abi))
	}
}

// noNamespaces is a kernel that gives no namespace: Landlock, seccomp and
// rlimits only.
func noNamespaces() Kernel {
	k := Probe()
	k.Namespaces, k.UserNamespace, k.NetworkNamespace, k.View, k.Proc, k.Loopback = false, false, false, false, false, false
	return k
}

// run is one sandboxed run of a command.
type run struct {
	cmd    *exec.Cmd
	launch *Launch
	report Report
	out    *bufio.Reader
	stdin  *os.File
}

// start wraps and starts argv under p on the kernel k returns, with a
// pipe on stdin and stdout, and returns once the launcher reported.
func start(t *testing.T, p Policy, k func() Kernel, argv []string, env []string, dir string) (*run, error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.SysProcAttr = sysProcAttrGroup()
	l, err := wrap(cmd, p, k)
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		l.Close()
		inW.Close()
		outR.Close()
		t.Fatal(err)
	}
	r := &run{cmd: cmd, launch: l, out: bufio.NewReader(outR), stdin: inW}
	t.Cleanup(func() { _ = r.stop(2 * time.Second); outR.Close() })
	r.report, err = l.Started()
	return r, err
}

// line reads one JSON line of the server's into v.
func (r *run) line(t *testing.T, v any) {
	t.Helper()
	s, err := r.out.ReadString('\n')
	if err != nil {
		t.Fatalf("read the server's output: %v (read %q)", err, s)
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("server output %q: %v", s, err)
	}
}

// stop ends the run's group as proc.Group.Stop does (SIGTERM, then
// SIGKILL after grace) and waits for it. It is safe to call twice.
func (r *run) stop(grace time.Duration) error {
	if r.cmd.ProcessState != nil {
		return nil
	}
	r.stdin.Close()
	pgid := r.cmd.Process.Pid
	_ = killGroup(pgid, false)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_ = killGroup(pgid, true)
	return <-done
}

// marked lists the pids of processes whose command line holds marker.
func marked(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
