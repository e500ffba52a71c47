package sandbox

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/snodod/snodod/internal/proc"
)

// sh runs script under p, with stdout piped, and returns the run.
func sh(t *testing.T, p Policy, k func() Kernel, script string, env ...string) (*run, error) {
	t.Helper()
	return start(t, p, k, []string{"/bin/sh", "-c", script}, append([]string{"PATH=/usr/bin:/bin"}, env...), t.TempDir())
}

// output ends the run's input, reads its whole output and waits for its
// exit. The input ends first: a script that reads until the end of its
// input (TestSignalForwarded's, when the signal came before its read
// began) would otherwise wait for it forever.
func (r *run) output(t *testing.T) (string, error) {
	t.Helper()
	r.stdin.Close()
	b, err := io.ReadAll(r.out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), r.launch.Exited(r.cmd.Wait())
}

func testPolicy(t *testing.T) Policy {
	return Policy{Level: Standard, Home: filepath.Join(t.TempDir(), "state", "home")}
}

// TestReportStandard: on a kernel with every mechanism (this one), the
// standard level enforces every feature it lists, and the report says so.
func TestReportStandard(t *testing.T) {
	needNamespaces(t)
	needLandlock(t, 6)
	r, err := sh(t, testPolicy(t), Probe, "exit 0")
	if err != nil {
		t.Fatal(err)
	}
	if w := r.report.Warning(); w != "" {
		t.Errorf("warning on a full kernel: %s", w)
	}
	for _, f := range []string{FeatureUserNamespace, FeatureFilesystemView, FeaturePIDNamespace, FeaturePrivateProc,
		FeatureLandlockFS, FeatureLandlockScopes, FeatureSeccomp, FeatureNoNewPrivs, FeatureCapabilities,
		FeatureMemoryLimit, FeatureOpenFilesLimit, FeatureProcessLimit} {
		if !r.report.Enforced(f) {
			t.Errorf("%s not enforced: %v", f, r.report)
		}
	}
	if _, ok := r.report.Feature(FeatureNetworkNamespace); ok {
		t.Errorf("standard (network all) lists a network namespace: %v", r.report)
	}
	if out, err := r.output(t); err != nil {
		t.Fatalf("exit: %v (%s)", err, out)
	}
}

// TestEnvironment: the server's home, caches and temporary directory
// point where it may write; agent sockets are dropped; the rest of its
// environment is kept; the launcher's own argv and environment carry
// none of it.
func TestEnvironment(t *testing.T) {
	needNamespaces(t)
	p := testPolicy(t)
	r, err := sh(t, p, Probe, `cat /proc/$PPID/cmdline /proc/$PPID/environ | tr '\0' ' '; echo; env; echo written > "$HOME/f" && cat "$HOME/f"; echo x > "$XDG_CACHE_HOME-probe" 2>/dev/null || echo cache-sibling-refused`,
		"HOME=/root", "SSH_AUTH_SOCK=/run/agent", "XDG_CONFIG_HOME=/root/.config", "MY_TOKEN=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.output(t)
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	launcherLine, env, _ := strings.Cut(out, "\n")
	if strings.Contains(launcherLine, "s3cret") || strings.Contains(launcherLine, "/bin/sh") {
		t.Errorf("the launcher's argv or environment carries the server's: %q", launcherLine)
	}
	for _, want := range []string{
		"HOME=" + p.Home, "XDG_CACHE_HOME=" + p.Home + "/.cache", "XDG_CONFIG_HOME=" + p.Home + "/.config",
		"XDG_DATA_HOME=" + p.Home + "/.local/share", "XDG_STATE_HOME=" + p.Home + "/.local/state",
		"npm_config_cache=" + p.Home + "/.npm", "UV_CACHE_DIR=" + p.Home + "/.cache/uv", "TMPDIR=/tmp",
		"MY_TOKEN=s3cret", "written",
	} {
		if !strings.Contains(env, "\n"+want+"\n") && !strings.HasPrefix(env, want+"\n") {
			t.Errorf("no %q in the server's environment:\n%s", want, env)
		}
	}
	for _, bad := range []string{"SSH_AUTH_SOCK", "/root/.config"} {
		if strings.Contains(env, bad) {
			t.Errorf("%q reached the server:\n%s", bad, env)
		}
	}
	if fi, err := os.Stat(p.Home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("private home: %v, %v; want a 0700 directory", fi, err)
	}
}

// TestLimitsExact: each rlimit is exactly the policy's (the boundary), and
// zero means the documented default.
func TestLimitsExact(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		want   []string
	}{
		{"given", Limits{MemoryBytes: 123 << 20, OpenFiles: 77, Processes: 99}, []string{
			"Max data size             128974848            128974848", "Max open files            77                   77"}},
		{"defaults", Limits{}, []string{
			"Max data size             4294967296           4294967296", "Max open files            4096                 4096"}},
	} {
		for _, share := range []bool{false, true} { // the init's spawn, and the exec
			t.Run(tc.name+"/share pids "+strconv.FormatBool(share), func(t *testing.T) {
				p := testPolicy(t)
				p.Limits = tc.limits
				p.SharePIDs = share
				r, err := sh(t, p, Probe, "cat /proc/self/limits")
				if err != nil {
					t.Fatal(err)
				}
				out, err := r.output(t)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("no %q in:\n%s", w, out)
					}
				}
				procs := "99"
				if tc.limits.Processes == 0 {
					procs = "1024"
				}
				line := "Max processes             " + procs
				if os.Geteuid() != 0 && Probe().UserNamespace && !strings.Contains(out, line) {
					t.Errorf("no %q in:\n%s", line, out)
				}
			})
		}
	}
}

// TestRequiredRefuses: with Required, a missing feature refuses the
// start: the server never runs, Started says which feature; without it the
// same kernel starts the server with a warning.
func TestRequiredRefuses(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	p := testPolicy(t)
	p.Paths = []string{dir}
	p.Required = true
	r, err := start(t, p, noNamespaces, []string{"/bin/sh", "-c", "echo > " + marker}, []string{"PATH=/usr/bin:/bin"}, dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), FeatureFilesystemView) {
		t.Fatalf("Started: %v; want ErrRefused naming %q", err, FeatureFilesystemView)
	}
	if r.report.Refused == "" {
		t.Errorf("the report does not say it refused: %v", r.report)
	}
	werr := r.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.ExitCode() != exitRefused {
		t.Errorf("launcher exit: %v; want status %d", werr, exitRefused)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the server ran")
	}

	p.Required = false
	r, err = start(t, p, noNamespaces, []string{"/bin/sh", "-c", "echo > " + marker}, []string{"PATH=/usr/bin:/bin"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if w := r.report.Warning(); !strings.Contains(w, FeatureFilesystemView) {
		t.Errorf("warning %q does not name the missing view", w)
	}
	if _, err := r.output(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the server did not run: %v", err)
	}
}

// TestExitStatus: the server's own status comes back through Exited, a
// signal included, whether the launcher stayed as its init or execve'd it.
func TestExitStatus(t *testing.T) {
	needNamespaces(t)
	for _, share := range []bool{false, true} {
		for _, tc := range []struct {
			script string
			code   int
			signal syscall.Signal
		}{{"exit 0", 0, 0}, {"exit 7", 7, 0}, {"kill -TERM $$", 0, syscall.SIGTERM}} {
			p := testPolicy(t)
			p.SharePIDs = share
			r, err := sh(t, p, Probe, tc.script)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.output(t)
			code, sig := status(t, err)
			if code != tc.code || sig != tc.signal {
				t.Errorf("share pids %v, %q: got status %d signal %v (%v); want %d %v", share, tc.script, code, sig, err, tc.code, tc.signal)
			}
		}
	}
}

// TestSignalForwarded: a SIGTERM to the launcher's process group (what
// proc.Group.Stop sends) reaches the server once.
func TestSignalForwarded(t *testing.T) {
	needNamespaces(t)
	r, err := sh(t, testPolicy(t), Probe, `trap 'echo TERM' TERM; echo ready; while read x; do :; done; echo end`)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := r.out.ReadString('\n'); l != "ready\n" {
		t.Fatalf("got %q", l)
	}
	if err := killGroup(r.cmd.Process.Pid, false); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.out.ReadString('\n'); l != "TERM\n" {
		t.Fatalf("got %q; want TERM", l)
	}
	out, err := r.output(t)
	if err != nil || out != "end\n" {
		t.Fatalf("after the signal: %q, %v; want only end (the signal delivered once)", out, err)
	}
}

// TestServerClosesStdout: the daemon sees the end of the server's output
// when the server closes it, though the init still runs: the init keeps
// no copy of the server's stdio.
func TestServerClosesStdout(t *testing.T) {
	needNamespaces(t)
	r, err := sh(t, testPolicy(t), Probe, `exec 1>&-; read x || true`)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r.out); err != nil || len(b) != 0 {
		t.Fatalf("read %q, %v; want the end at once", b, err)
	}
	if r.cmd.ProcessState != nil {
		t.Fatal("the launcher had exited")
	}
	if _, err := r.output(t); err != nil {
		t.Fatal(err)
	}
}

// TestExtraFiles: a caller's own ExtraFiles reach the server at the same
// descriptor numbers, under the init and under execve.
func TestExtraFiles(t *testing.T) {
	needNamespaces(t)
	for _, share := range []bool{false, true} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p := testPolicy(t)
		p.SharePIDs = share
		cmd := exec.Command("/bin/sh", "-c", "echo extra >&3")
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.ExtraFiles = []*os.File{pw}
		l, err := Wrap(cmd, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if _, err := l.Started(); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(pr)
		pr.Close()
		if err := l.Exited(cmd.Wait()); err != nil || string(b) != "extra\n" {
			t.Errorf("share %v: fd 3 gave %q, exit %v", share, b, err)
		}
	}
}

// TestOff: level off leaves the command as it is.
func TestOff(t *testing.T) {
	cmd := exec.Command("/bin/true")
	before := *cmd
	l, err := Wrap(cmd, Policy{Level: Off})
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != before.Path || len(cmd.Args) != 1 || cmd.SysProcAttr != nil || cmd.ExtraFiles != nil {
		t.Fatalf("off changed the command: %+v", cmd)
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if rep, err := l.Started(); err != nil || rep.Level != Off || rep.String() != "sandbox off" {
		t.Fatalf("Started under off: %v, %v", rep, err)
	}
	l.Close()
}

// TestProcStart: through proc.Start, which owns the process group, the
// namespaces Wrap asks for are kept.
func TestProcStart(t *testing.T) {
	needNamespaces(t)
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	l, err := Wrap(cmd, testPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	g, err := proc.Start(cmd)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	rep, err := l.Started()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Enforced(FeaturePIDNamespace) || !rep.Enforced(FeatureFilesystemView) {
		t.Errorf("through proc.Start: %v", rep)
	}
	if code, _ := status(t, l.Exited(g.Wait())); code != 3 {
		t.Errorf("exit status %d; want 3", code)
	}
}

// TestProcMarker: the group marker proc.Start gives the launcher reaches
// the server and its children (the daemon finds an escapee by it), and
// the server's own environment is kept beside it.
func TestProcMarker(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    func() Kernel
	}{{"namespaces", Probe}, {"none", noNamespaces}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "namespaces" {
				needNamespaces(t)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command("/bin/sh", "-c", `sh -c 'echo "$SNODOD_GROUP $MINE"'`)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "MINE=kept", proc.MarkerEnv + "=forged"}
			cmd.Stdout = w
			l, err := wrap(cmd, testPolicy(t), tc.k)
			if err != nil {
				w.Close()
				t.Fatal(err)
			}
			g, err := proc.Start(cmd)
			w.Close()
			if err != nil {
				l.Close()
				t.Fatal(err)
			}
			if _, err := l.Started(); err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(r)
			if err := l.Exited(g.Wait()); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.TrimSpace(string(out)), g.Marker()+" kept"; got != want {
				t.Errorf("the server's child sees %q, want %q", got, want)
			}
		})
	}
}

// TestDroppedCloneFlags: a caller that replaces SysProcAttr loses the
// namespaces; the launcher notices (it compares its namespaces with the
// daemon's), says so, and still applies the rest.
func TestDroppedCloneFlags(t *testing.T) {
	needNamespaces(t)
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	l, err := Wrap(cmd, testPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = sysProcAttrGroup()
	if err := cmd.Start(); err != nil {
		l.Close()
		t.Fatal(err)
	}
	rep, err := l.Started()
	if err != nil {
		t.Fatal(err)
	}
	f, _ := rep.Feature(FeaturePIDNamespace)
	if f.Enforced || !strings.Contains(f.Detail, "asked for, but not given") {
		t.Errorf("pid namespace: %v", f)
	}
	if !rep.Enforced(FeatureLandlockFS) && Probe().LandlockABI > 0 {
		t.Errorf("landlock not applied: %v", rep)
	}
	if err := l.Exited(cmd.Wait()); err != nil {
		t.Fatal(err)
	}
}

// TestCommandNotFound: a command not on the child's PATH fails in Wrap,
// before anything starts, with the name and the PATH it searched.
func TestCommandNotFound(t *testing.T) {
	cmd := exec.Command("no-such-server-xyz")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	_, err := Wrap(cmd, testPolicy(t))
	if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "no-such-server-xyz") {
		t.Fatalf("Wrap: %v; want ErrNotFound naming the command", err)
	}
}

// status is the exit code and signal an Exited error says.
func status(t *testing.T, err error) (int, syscall.Signal) {
	t.Helper()
	var ee *ExitError
	var xe *exec.ExitError
	switch {
	case err == nil:
		return 0, 0
	case errors.As(err, &ee):
		return ee.Code, ee.Signal
	case errors.As(err, &xe):
		ws := xe.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return 0, ws.Signal()
		}
		return ws.ExitStatus(), 0
	}
	t.Fatalf("not an exit: %v", err)
	return 0, 0
}

// TestNodeUnderStandard: node and npx, resolved on PATH, run under the
// standard level: the interpreter's installation is readable, the home
// and /tmp writable, and npm's cache is the private one.
func TestNodeUnderStandard(t *testing.T) {
	needNamespaces(t)
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed")
	}
	path := "PATH=" + filepath.Dir(node) + ":/usr/bin:/bin"
	p := testPolicy(t)
	script := `const fs = require("fs"), os = require("os"), path = require("path");
fs.writeFileSync(path.join(os.homedir(), "h"), "x");
fs.writeFileSync(path.join(os.tmpdir(), "t"), "x");
console.log(os.homedir(), os.tmpdir(), process.env.npm_config_cache);`
	r, err := start(t, p, Probe, []string{"node", "-e", script}, []string{path}, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.output(t)
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if want := p.Home + " /tmp " + p.Home + "/.npm\n"; out != want {
		t.Errorf("node said %q; want %q", out, want)
	}
	r, err = start(t, p, Probe, []string{"npx", "--version"}, []string{path}, "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.output(t); err != nil || out == "" {
		t.Fatalf("npx --version: %q, %v", out, err)
	}
}
