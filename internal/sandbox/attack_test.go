package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The attack suite: a hosted server of the test's own (./attacker) tries,
// under "standard" (and "strict" for the network), what a hostile MCP
// server would. Each case runs in layers: the full sandbox, then with a
// layer taken away, so that the test names the rule that refused it and
// shows the next one holds too. It runs as the user running the tests
// (root in CI) and, as root, again as nobody (TestAttacksUnprivileged).

// world is the attack suite's files: a user's home with an ssh key, a
// state directory with a token, a socket and the server's private home
// inside it, a working directory and a directory outside every grant.
type world struct {
	root, home, key, state, token, sock, private, work, outside string
}

func newWorld(t *testing.T) world {
	t.Helper()
	root := t.TempDir()
	w := world{
		root:    root,
		home:    filepath.Join(root, "home"),
		state:   filepath.Join(root, "state"),
		work:    filepath.Join(root, "work"),
		outside: filepath.Join(root, "outside"),
	}
	w.key = filepath.Join(w.home, ".ssh", "id_ed25519")
	w.token = filepath.Join(w.state, "tokens", "github.token")
	w.sock = filepath.Join(w.state, "snodod.sock")
	w.private = filepath.Join(w.state, "sandbox", "attacker", "home")
	for _, d := range []string{filepath.Dir(w.key), filepath.Dir(w.token), w.work, w.outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{w.key, w.token} {
		if err := os.WriteFile(f, []byte("SECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	acceptAndClose(t, "unix", w.sock)
	return w
}

// acceptAndClose listens on network and address, accepting and closing
// every connection until the test ends, and returns the address.
func acceptAndClose(t *testing.T, network, address string) string {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// policy is the suite's standard policy: the state directory hidden, the
// private home in it, small limits so the bounds show.
func (w world) policy(level Level) Policy {
	return Policy{
		Level:  level,
		Home:   w.private,
		Hide:   []string{w.state},
		Limits: Limits{MemoryBytes: 256 << 20, Processes: 64},
	}
}

// result is the attacker's line.
type result struct {
	OK     bool   `json:"ok"`
	Errno  string `json:"errno"`
	Detail string `json:"detail"`
	Count  int64  `json:"count"`
}

// attack runs the attacker in mode under p, on kernel k, and returns its
// line and the run.
func (w world) attack(t *testing.T, p Policy, k func() Kernel, mode string, env ...string) (result, *run) {
	t.Helper()
	env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + w.home}, env...)
	r, err := start(t, p, k, []string{attackerPath, mode}, env, w.work)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var res result
	r.line(t, &res)
	return res, r
}

// layer is one way to run a case: a name, the policy and kernel change,
// and what must happen and which rule does it.
type layer struct {
	name   string
	adjust func(*Policy)
	kernel func() Kernel
	errno  string // "" means the attempt succeeds (and check says why that is fine)
	rule   string
}

var (
	full      = func(*Policy) {}
	noSeccomp = func(p *Policy) { p.Seccomp = []string{} }
	broad     = func(w world) func(*Policy) { return func(p *Policy) { p.Paths = []string{w.root} } }
)

func TestAttacks(t *testing.T) {
	needNamespaces(t)
	needLandlock(t, 6)
	w := newWorld(t)
	self := strconv.Itoa(os.Getpid()) // the daemon, to the attacker
	// Landlock refuses connect(2) to a pathname unix socket outside the
	// sandbox only from ABI 9: below it, only the view hides the socket.
	unixErrno, unixRule := "EACCES", "Landlock: a unix socket outside the domain"
	if Probe().LandlockABI < 9 {
		unixErrno, unixRule = "", fmt.Sprintf("nothing (Landlock ABI %d < 9): without the view, the socket is reachable", Probe().LandlockABI)
	}
	cases := []struct {
		name   string
		mode   string
		env    []string
		layers []layer
		check  func(t *testing.T, res result) // extra checks of a success
	}{
		{
			name: "read ~/.ssh/id_ed25519", mode: "read", env: []string{"ATTACK_PATH=" + w.key},
			layers: []layer{
				{"standard", full, Probe, "ENOENT", "filesystem view: the user's home is not in it"},
				{"landlock only", full, noNamespaces, "EACCES", "Landlock: not granted"},
			},
		},
		{
			name: "read the state directory's token", mode: "read", env: []string{"ATTACK_PATH=" + w.token},
			layers: []layer{
				{"standard", full, Probe, "ENOENT", "filesystem view: not granted"},
				{"standard, paths naming its parent", broad(w), Probe, "ENOENT", "filesystem view: an empty tmpfs over the state directory"},
				{"landlock only, paths naming its parent", broad(w), noNamespaces, "EACCES", "Landlock: the grant carved around the state directory"},
			},
		},
		{
			name: "connect to the daemon's socket in the state directory", mode: "unix", env: []string{"ATTACK_PATH=" + w.sock},
			layers: []layer{
				{"standard, paths naming its parent", broad(w), Probe, "ENOENT", "filesystem view: hidden"},
				{"landlock only, paths naming its parent", broad(w), noNamespaces, unixErrno, unixRule},
			},
		},
		{
			name: "write outside its paths", mode: "write", env: []string{"ATTACK_PATH=" + filepath.Join(w.outside, "x")},
			layers: []layer{
				{"standard", full, Probe, "ENOENT", "filesystem view: the directory is not in it"},
				{"landlock only", full, noNamespaces, "EACCES", "Landlock: not granted"},
			},
		},
		{
			name: "write into the system", mode: "write", env: []string{"ATTACK_PATH=/usr/snodod-attack"},
			layers: []layer{
				{"standard", full, Probe, "EROFS", "filesystem view: /usr is a read-only bind"},
				{"landlock only", full, noNamespaces, "EACCES", "Landlock: read-only grant"},
			},
		},
		{
			name: "write its working directory", mode: "write", env: []string{"ATTACK_PATH=" + filepath.Join(w.work, "allowed")},
			layers: []layer{{"standard", full, Probe, "", "the working directory is granted read-write"}},
		},
		{
			name: "write /tmp", mode: "write", env: []string{"ATTACK_PATH=/tmp/snodod-attack-" + strconv.Itoa(os.Getpid())},
			layers: []layer{
				{"standard", full, Probe, "", "a private /tmp (the host's has no such file)"},
				{"landlock only", full, noNamespaces, "EACCES", "Landlock: /tmp not granted (TMPDIR is in the private home)"},
			},
			check: func(t *testing.T, res result) {
				if _, err := os.Stat("/tmp/snodod-attack-" + strconv.Itoa(os.Getpid())); err == nil {
					t.Error("the write reached the host's /tmp")
				}
			},
		},
		{
			name: "ptrace the daemon", mode: "ptrace", env: []string{"ATTACK_PID=" + self},
			layers: []layer{
				{"standard", full, Probe, "EPERM", "seccomp: ptrace refused"},
				{"standard without seccomp", noSeccomp, Probe, "ESRCH", "PID namespace: the daemon is not there"},
				{"landlock only without seccomp", noSeccomp, noNamespaces, "EPERM", "Landlock: a process outside the domain"},
			},
		},
		{
			name: "ptrace its parent", mode: "ptrace", env: []string{"ATTACK_PID=parent"},
			layers: []layer{
				{"standard", full, Probe, "EPERM", "seccomp: ptrace refused"},
				{"standard without seccomp", noSeccomp, Probe, "EPERM", "the init is not dumpable and holds capabilities the server lacks"},
				{"landlock only without seccomp", noSeccomp, noNamespaces, "EPERM", "Landlock: the parent is outside the domain"},
			},
		},
		{
			name: "read the daemon's /proc environ", mode: "environ", env: []string{"ATTACK_PID=" + self},
			layers: []layer{
				{"standard", full, Probe, "ENOENT", "private /proc: the daemon is not in it"},
				{"landlock only", full, noNamespaces, "EACCES", "Landlock: a process outside the domain"},
			},
		},
		{
			name: "signal the daemon", mode: "signal", env: []string{"ATTACK_PID=" + self},
			layers: []layer{
				{"standard", full, Probe, "ESRCH", "PID namespace: the daemon is not there"},
				{"landlock only", full, noNamespaces, "EPERM", "Landlock scope: no signals outside the sandbox"},
			},
		},
		{
			name: "mount over /tmp", mode: "mount",
			layers: []layer{
				{"standard", full, Probe, "EPERM", "seccomp: mount refused"},
				{"standard without seccomp", noSeccomp, Probe, "EPERM", "no capabilities left"},
			},
		},
		{
			name: "allocate past its memory limit", mode: "alloc",
			layers: []layer{{"standard", full, Probe, "ENOMEM", "RLIMIT_DATA"}},
			check:  nil,
		},
		{
			name: "fork bomb", mode: "forkbomb",
			layers: []layer{{"standard", full, Probe, "EAGAIN", "pid_max of its PID namespace, and RLIMIT_NPROC in its user namespace for a non-root uid"}},
		},
	}
	for _, c := range cases {
		for _, l := range c.layers {
			t.Run(c.name+"/"+l.name, func(t *testing.T) {
				p := w.policy(Standard)
				l.adjust(&p)
				res, r := w.attack(t, p, l.kernel, c.mode, c.env...)
				switch {
				case l.errno == "" && !res.OK:
					t.Fatalf("refused (%s: %s); want it allowed: %s", res.Errno, res.Detail, l.rule)
				case l.errno != "" && res.OK:
					t.Fatalf("it worked (%.80q); want %s by %s\nreport: %v", res.Detail, l.errno, l.rule, r.report)
				case l.errno != "" && res.Errno != l.errno:
					t.Fatalf("refused with %s (%s); want %s by %s\nreport: %v", res.Errno, res.Detail, l.errno, l.rule, r.report)
				}
				if c.check != nil && res.OK {
					c.check(t, res)
				}
				switch c.mode {
				case "alloc":
					if res.Count >= p.Limits.MemoryBytes {
						t.Errorf("allocated %d bytes past the %d limit", res.Count, p.Limits.MemoryBytes)
					}
				case "forkbomb":
					// RLIMIT_NPROC bounds a non-root uid exactly; pid_max
					// bounds root too, with the kernel's 300 reserved pids.
					bound := p.Limits.Processes
					if os.Geteuid() == 0 {
						bound += pidReserved
					}
					if res.Count >= bound {
						t.Errorf("forked %d processes past the bound %d", res.Count, bound)
					}
					t.Logf("forked %d, then %s; %v", res.Count, res.Errno, r.report.Features)
				}
				if l.errno == "" {
					t.Logf("allowed: %s", l.rule)
				} else {
					t.Logf("refused by %s (%s)", l.rule, res.Errno)
				}
			})
		}
	}
}

// TestAttackSetsidEscape: a server's descendant that calls setsid and
// ignores SIGTERM ends with the tree, because the init of the PID
// namespace ends. Without the PID namespace (SharePIDs) it survives the
// group's SIGKILL: the namespace is the rule that contains it.
func TestAttackSetsidEscape(t *testing.T) {
	needNamespaces(t)
	w := newWorld(t)
	for _, tc := range []struct {
		name    string
		share   bool
		survive bool
		rule    string
	}{
		{"standard", false, false, "PID namespace: its init's exit ends every process in it"},
		{"sharing the daemon's PIDs", true, true, "none: the process group's SIGKILL misses a new session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("snodod-escapee-%d-%v", os.Getpid(), tc.share)
			p := w.policy(Standard)
			p.SharePIDs = tc.share
			res, r := w.attack(t, p, Probe, "escape", "ATTACK_MARKER="+marker)
			if !res.OK || strings.TrimSpace(res.Detail) != "escaped" {
				t.Fatalf("the escapee did not start: %+v", res)
			}
			if len(marked(marker)) == 0 {
				t.Fatal("no escapee found by its marker")
			}
			_ = r.stop(0) // SIGTERM, which both ignore, then SIGKILL
			left := marked(marker)
			t.Cleanup(func() {
				for _, pid := range marked(marker) {
					n, _ := strconv.Atoi(pid)
					_ = killPID(n)
				}
			})
			if tc.survive != (len(left) > 0) {
				t.Fatalf("after the stop, escapees left: %v; want survivors %v (%s)", left, tc.survive, tc.rule)
			}
			t.Logf("%s", tc.rule)
		})
	}
}

// TestAttackForkBombLeavesNothing: every child of a fork bomb is gone
// once the server exits (the PID namespace ends them).
func TestAttackForkBombLeavesNothing(t *testing.T) {
	needNamespaces(t)
	w := newWorld(t)
	res, r := w.attack(t, w.policy(Standard), Probe, "forkbomb")
	if res.Errno != "EAGAIN" || res.Count == 0 {
		t.Fatalf("fork bomb: %+v; want some children, then EAGAIN", res)
	}
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("the server's exit: %v", err)
	}
	// The init of the namespace reaps every process of it before its own
	// exit is reported: none of the bomb's children may be left.
	if left := marked(attackerPath + "\x00forkbomb"); len(left) > 0 {
		t.Errorf("processes of the bomb outlived it: %v", left)
	}
}

// TestAttackNetwork: under strict, a loopback port it was not given is
// unreachable: in its own network namespace (lo down) by default; with an
// allow list, Landlock refuses every other port.
func TestAttackNetwork(t *testing.T) {
	needNamespaces(t)
	w := newWorld(t)
	given, other := listen(t), listen(t)
	cases := []struct {
		name    string
		network Network
		kernel  func() Kernel
		addr    string
		errno   string
		rule    string
	}{
		{"strict", Network{}, Probe, other, "ENETUNREACH", "network namespace: no interface up"},
		{"strict, loopback", Network{Mode: NetworkLoopback}, Probe, other, "ECONNREFUSED", "network namespace: its own loopback, not the host's"},
		{"strict, allow list, given port", Network{Mode: NetworkPorts, Allow: []Endpoint{{Host: "127.0.0.1", Port: port(given)}}}, Probe, given, "", "Landlock TCP: the port is allowed"},
		{"strict, allow list, other port", Network{Mode: NetworkPorts, Allow: []Endpoint{{Host: "127.0.0.1", Port: port(given)}}}, Probe, other, "EACCES", "Landlock TCP: the port is not allowed"},
		{"strict, no network namespace", Network{}, noNamespaces, other, "EACCES", "Landlock TCP: every connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.network.Mode == NetworkPorts || strings.Contains(c.name, "no network namespace") {
				needLandlock(t, 4)
			}
			p := w.policy(Strict)
			p.Network = c.network
			res, r := w.attack(t, p, c.kernel, "connect", "ATTACK_ADDR="+c.addr)
			switch {
			case c.errno == "" && !res.OK:
				t.Fatalf("refused (%s %s); want allowed: %s", res.Errno, res.Detail, c.rule)
			case c.errno != "" && res.Errno != c.errno:
				t.Fatalf("got %+v; want %s by %s\nreport: %v", res, c.errno, c.rule, r.report)
			}
			t.Logf("%s", c.rule)
		})
	}
}

// listen returns the address of a loopback TCP listener that accepts and
// closes.
func listen(t *testing.T) string { return acceptAndClose(t, "tcp4", "127.0.0.1:0") }

func port(addr string) uint16 {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return uint16(n)
}

// TestAttacksUnprivileged re-runs the attack suite as nobody (through
// setpriv), as a user install of snodod runs: user namespaces, Landlock
// and seccomp need no privilege.
func TestAttacksUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestAttacks is the unprivileged run")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		skipOrFail(t, "setpriv (util-linux) is not installed")
	}
	dir, err := os.MkdirTemp("", "snodod-sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, att := filepath.Join(dir, "sandbox.test"), filepath.Join(dir, "attacker")
	for src, dst := range map[string]string{self: bin, attackerPath: att} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-test.run", "^(TestAttacks|TestAttackSetsidEscape|TestAttackForkBombLeavesNothing|TestAttackNetwork)$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{attackerEnv + "=" + att, "PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=/tmp", "CI=" + os.Getenv("CI")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the attack suite as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestAttacks ") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("the attack suite as nobody did not run whole:\n%s", out)
	}
	t.Logf("as nobody:\n%s", out)
}
