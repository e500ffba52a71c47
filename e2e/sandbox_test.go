package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
)

// The sandbox through the daemon (docs/security.md, "Sandbox"): a hosted
// server of the test's own (internal/sandbox/attacker in its MCP mode)
// tries what a hostile server would, as the daemon starts it, beside a
// healthy session that keeps working.

var (
	attackerOnce sync.Once
	attackerBin  string
	attackerErr  error
)

// attacker builds internal/sandbox/attacker once per test run.
func attacker(t *testing.T) string {
	t.Helper()
	attackerOnce.Do(func() {
		attackerBin = filepath.Join(filepath.Dir(binary), "attacker")
		out, err := exec.Command("go", "build", "-o", attackerBin, "github.com/snodod/snodod/internal/sandbox/attacker").CombinedOutput()
		if err != nil {
			attackerErr = fmt.Errorf("build the attacker: %v\n%s", err, out)
		}
	})
	if attackerErr != nil {
		t.Fatal(attackerErr)
	}
	return attackerBin
}

// attackResult is the attacker's line.
type attackResult struct {
	OK     bool   `json:"ok"`
	Errno  string `json:"errno"`
	Detail string `json:"detail"`
	Count  int64  `json:"count"`
}

// attack calls the server's attack tool with args, on session s.
func attack(t *testing.T, s *sessionConn, id int, tool string, args map[string]string) attackResult {
	t.Helper()
	b, _ := json.Marshal(args)
	if err := s.send(callLine(id, tool, string(b))); err != nil {
		t.Fatal(err)
	}
	r, err := s.answer(strconv.Itoa(id), answerWithin)
	if err != nil {
		t.Fatal(err)
	}
	text, err := toolText(r)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var res attackResult
	if err := json.Unmarshal([]byte(text), &res); err != nil {
		t.Fatalf("%s %v: %q: %v", tool, args, text, err)
	}
	return res
}

// TestSandboxAttacksThroughDaemon: under standard, the hosted server
// cannot read a planted ~/.ssh key or the state directory's token files,
// write outside its paths, read the daemon's environment or ptrace it, nor
// allocate past its memory limit, and a fork bomb is bounded; under
// strict it cannot reach a loopback port. Each time the healthy session
// beside it still gets its answers, and the server still answers after.
func TestSandboxAttacksThroughDaemon(t *testing.T) {
	bin := attacker(t)
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	key := filepath.Join(home, ".ssh", "id_ed25519")
	token := filepath.Join(dir, "state", "snodod", "oauth", "github.json")
	work := filepath.Join(dir, "work")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Dir(key), filepath.Dir(token), work, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{key, token} {
		if err := os.WriteFile(f, []byte("SECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	config := fmt.Sprintf(`
[sandbox]
limits = { memory = "256MiB", processes = 64 }

[mcpServers.evil]
command = %q
args = ["mcp", %q]
start = "eager"

[mcpServers.tight]
command = %q
args = ["mcp"]
sandbox = "strict"
start = "eager"
`, bin, work, bin)
	d := startDaemonIn(t, dir, config, []string{"HOME=" + home})
	d.awaitStatus(t, "both servers ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 2 && st.Upstreams[0].State == "ready" && st.Upstreams[1].State == "ready"
	})
	daemonPID := strconv.Itoa(d.cmd.Process.Pid)

	healthy := mustDial(t, d.socket)
	defer healthy.Close()
	if err := healthy.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	s := mustDial(t, d.socket)
	defer s.Close()
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	id := 10
	for _, tc := range []struct {
		what string
		tool string
		args map[string]string
		ok   bool
	}{
		{"write its argument's directory (the control)", "evil__attack", map[string]string{"mode": "write", "path": filepath.Join(work, "f")}, true},
		{"read the planted ssh key", "evil__attack", map[string]string{"mode": "read", "path": key}, false},
		{"read the state directory's token", "evil__attack", map[string]string{"mode": "read", "path": token}, false},
		{"write outside its paths", "evil__attack", map[string]string{"mode": "write", "path": filepath.Join(outside, "f")}, false},
		{"write into the user's home", "evil__attack", map[string]string{"mode": "write", "path": filepath.Join(home, ".bashrc")}, false},
		{"read the daemon's environment", "evil__attack", map[string]string{"mode": "environ", "pid": daemonPID}, false},
		{"ptrace the daemon", "evil__attack", map[string]string{"mode": "ptrace", "pid": daemonPID}, false},
		{"allocate past the memory limit", "evil__attack", map[string]string{"mode": "alloc"}, false},
		{"a fork bomb", "evil__attack", map[string]string{"mode": "forkbomb"}, false},
		{"connect to a loopback port under strict", "tight__attack", map[string]string{"mode": "connect", "addr": ln.Addr().String()}, false},
	} {
		id++
		r := attack(t, s, id, tc.tool, tc.args)
		if r.OK != tc.ok {
			t.Errorf("%s: ok = %t (%s %s), want %t", tc.what, r.OK, r.Errno, r.Detail, tc.ok)
		}
		if strings.Contains(r.Detail, "SECRET") {
			t.Errorf("%s: the secret reached the server: %+v", tc.what, r)
		}
		if tc.args["mode"] == "forkbomb" && (r.Count == 0 || r.Count > 64+300) {
			t.Errorf("fork bomb: %d processes before the refusal (%s), want a bound near processes = 64", r.Count, r.Errno)
		}
		t.Logf("%s: %s %s", tc.what, r.Errno, r.Detail)
		id++
		if err := healthy.echo(id, "still here "+strconv.Itoa(id)); err != nil {
			t.Fatalf("the healthy session after %q: %v", tc.what, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "f")); err != nil || string(b) != "pwned\n" {
		t.Errorf("the allowed write: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("the write outside its paths landed")
	}
	// The server itself is unharmed by its own attempts.
	id++
	if r := attack(t, s, id, "evil__attack", map[string]string{"mode": "write", "path": filepath.Join(work, "g")}); !r.OK {
		t.Errorf("after the attacks: %+v", r)
	}

	// setsid and an ignored SIGTERM: the escapee outlives its parent
	// inside the sandbox, and ends with the server's tree at a stop.
	marker := fmt.Sprintf("escapee-%d", os.Getpid())
	id++
	if r := attack(t, s, id, "evil__attack", map[string]string{"mode": "escape", "marker": marker}); !r.OK || !strings.Contains(r.Detail, "escaped") {
		t.Fatalf("escape: %+v", r)
	}
	escapee := markedPID(t, marker)
	if escapee == 0 {
		t.Fatal("no escapee running after the escape")
	}
	if out, err := d.command("upstream", "stop", "evil").CombinedOutput(); err != nil {
		t.Fatalf("upstream stop evil: %v\n%s", err, out)
	}
	if !waitGone(escapee, answerWithin) {
		t.Errorf("the escapee %d (setsid, SIGTERM ignored) outlived its server's stop", escapee)
	}
	id++
	if err := healthy.echo(id, "after the stop"); err != nil {
		t.Fatalf("the healthy session after the stop: %v", err)
	}
	if out, err := d.command("upstream", "start", "evil").CombinedOutput(); err != nil {
		t.Fatalf("upstream start evil: %v\n%s", err, out)
	}
	d.awaitStatus(t, "evil ready again", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 2 && st.Upstreams[0].State == "ready"
	})

	// status: the level in force, nothing missing on this kernel, and
	// the whole tree's CPU time and memory.
	st := d.statusJSON(t)
	for i, want := range []string{"standard", "strict"} {
		r := st.Upstreams[i]
		if r.Sandbox != want || len(r.Unenforced) != 0 || r.RSSBytes <= 0 || r.CPUMs < 0 {
			t.Errorf("status of %s: sandbox %q, unenforced %q, rss %d, cpu %dms; want %s, none, some memory", r.Name, r.Sandbox, r.Unenforced, r.RSSBytes, r.CPUMs, want)
		}
	}
	out, err := d.command("status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SANDBOX") || !strings.Contains(string(out), " strict ") {
		t.Errorf("snodod status: %v\n%s", err, out)
	}
}

// TestSandboxNPXUncached: `npx -y` of a package not yet in its cache
// downloads it under standard (its cache is in its private home), and
// under strict fails with a message that says why: no network.
func TestSandboxNPXUncached(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads a package from the npm registry (a minute)")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("no npx on PATH")
	}
	if c, err := net.DialTimeout("tcp", "registry.npmjs.org:443", 5*time.Second); err != nil {
		t.Skipf("the npm registry is not reachable from here: %v", err)
	} else {
		c.Close()
	}
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const pkg = "@modelcontextprotocol/server-memory@2026.8.31"
	config := fmt.Sprintf(`
[sandbox]

[mcpServers.online]
command = "npx"
args = ["-y", %q]
start = "eager"
start_timeout = "5m"

[mcpServers.offline]
command = "npx"
args = ["-y", %q]
sandbox = "strict"
start = "eager"
restart = { max_attempts = 1 }
`, pkg, pkg)
	d := startDaemonIn(t, dir, config, nil)
	st := d.awaitStatus(t, "online ready and offline failed", 5*time.Minute, func(st *control.Status) bool {
		return len(st.Upstreams) == 2 && st.Upstreams[1].State == "ready" && st.Upstreams[0].State == "failed"
	})
	if cause := st.Upstreams[0].Cause; !strings.Contains(cause, "its sandbox, strict, has no network: npx cannot download a package it has not cached") {
		t.Errorf("offline's cause does not say why: %q", cause)
	}
	cache := filepath.Join(dir, "state", "snodod", "sandbox", "mcpServers.online", ".npm")
	if entries, err := os.ReadDir(cache); err != nil || len(entries) == 0 {
		t.Errorf("online's npm cache %s: %v, %v; want its downloads there", cache, entries, err)
	}
	s := mustDial(t, d.socket)
	defer s.Close()
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := s.send(callLine(1, "online__read_graph", "{}")); err != nil {
		t.Fatal(err)
	}
	r, err := s.answer("1", answerWithin)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := toolText(r); err != nil || !strings.Contains(text, "entities") {
		t.Errorf("online read_graph: %q, %v", text, err)
	}
}

// markedPID is the pid of the process whose command line holds marker, or 0.
func markedPID(t *testing.T, marker string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), marker) {
			return pid
		}
	}
	return 0
}
