//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// Tests of the daemon's clients (connect, status, kill) and of serve's
// start and end, as real processes.

// TestClientsIgnoreConfigTypos: a typo in the configuration file, or a
// stray SNODOD_ variable, is a warning for connect and status, which need
// only the socket paths; serve still refuses it.
func TestClientsIgnoreConfigTypos(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir, "--demo")
	file := filepath.Join(dir, "config", "snodod", "config.toml")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("[log]\nlevl = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(p.env, "SNODOD_LOG__LEVL=debug")
	warnings := []string{
		`warning: unknown key "log.levl"; did you mean "log.level"?`,
		"warning: unknown variable SNODOD_LOG__LEVL; did you mean SNODOD_LOG__LEVEL?",
		"warning: going on, as only the socket paths are needed here",
	}
	r := runIn(t, env, "", "status", "--socket", p.socket)
	if r.status != 0 || !strings.Contains(r.stdout, "0 sessions (max 1024)") {
		t.Errorf("status: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	r2 := runIn(t, env, lines(initLine), "connect", "--relay", "--socket", p.socket)
	if r2.status != 0 || !strings.HasPrefix(r2.stdout, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Errorf("connect: %d\n%s%s", r2.status, r2.stdout, r2.stderr)
	}
	for _, w := range warnings {
		if !strings.Contains(r.stderr, "snodod status: "+w) || !strings.Contains(r2.stderr, "snodod connect: "+w) {
			t.Errorf("a warning is missing: %q\nstatus:\n%s\nconnect:\n%s", w, r.stderr, r2.stderr)
		}
	}
	if r := runIn(t, env, "", "serve", "--socket", filepath.Join(dir, "other.sock")); r.status != 1 || !strings.Contains(r.stderr, `unknown key "log.levl"`) {
		t.Errorf("serve with the typo: %d\n%s", r.status, r.stderr)
	}
}

// TestConnectRefused: a refused session makes connect exit 1 with the same
// line whether it relays or hands over; the client reads
// the daemon's refusal line on its output either way.
func TestConnectRefused(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir, "--max-sessions", "1")
	c, err := net.Dial("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, lines(initLine))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	const refusal = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Server session capacity exhausted (daemon.max_sessions = 1)"}}` + "\n"
	for _, mode := range []string{"--relay", "--handover"} {
		r := runIn(t, p.env, lines(initLine), "connect", mode, "--socket", p.socket)
		path := p.control
		if mode == "--relay" {
			path = p.socket
		}
		want := fmt.Sprintf("snodod connect: the daemon at %s refused the session: Server session capacity exhausted (daemon.max_sessions = 1)\n", path)
		if r.status != 1 || r.stderr != want || r.stdout != refusal {
			t.Errorf("connect %s: status %d, stdout %q, stderr %q\nwant 1, %q and %q", mode, r.status, r.stdout, r.stderr, refusal, want)
		}
	}
}

// startConnect runs `snodod connect` on pipes and starts a sleep of an
// hour through it.
func startConnect(t *testing.T, p *serveProcess) (*exec.Cmd, *bytes.Buffer, io.WriteCloser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	conn := exec.CommandContext(ctx, binary, "connect", "--socket", p.socket)
	conn.Env = p.env
	stdin, err := conn.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	stdout, err := conn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(bytes.Buffer)
	conn.Stderr = stderr
	if err := conn.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(stdin, lines(initLine, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":3600000}}}`))
	scan := bufio.NewScanner(stdout)
	if !scan.Scan() {
		t.Fatal("no answer to initialize")
	}
	go io.Copy(io.Discard, stdout)
	return conn, stderr, stdin
}

// TestKillCommand: `snodod kill ID` ends one session; its connect exits 1
// saying so.
func TestKillCommand(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir, "--demo")
	conn, stderr, _ := startConnect(t, p)
	r := runIn(t, p.env, "", "kill", "--socket", p.socket, "1")
	if r.status != 0 || r.stderr != "" || r.stdout != "session 1 ended\n" {
		t.Fatalf("kill: %d %q %q, want 0 and \"session 1 ended\"", r.status, r.stdout, r.stderr)
	}
	conn.Wait()
	if got := stderr.String(); conn.ProcessState.ExitCode() != 1 || !strings.HasPrefix(got, "snodod connect: session 1 ended: session killed: by snodod kill (pid ") {
		t.Errorf("connect: status %d, stderr %q", conn.ProcessState.ExitCode(), got)
	}
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"1"}, 1, "snodod kill: no session 1; 'snodod status' lists the sessions\n"},
		{[]string{"x"}, 2, "snodod kill: \"x\" is not a session id; 'snodod status' shows them\n"},
		{nil, 2, "snodod kill: needs one session id, as 'snodod status' shows it\n"},
	} {
		r := runIn(t, p.env, "", append([]string{"kill", "--socket", p.socket}, tc.args...)...)
		if r.status != tc.status || !strings.HasPrefix(r.stderr, tc.stderr) {
			t.Errorf("kill %q: %d %q, want %d %q", tc.args, r.status, r.stderr, tc.status, tc.stderr)
		}
	}
}

// TestServeDrainAndSecondSignal: during a drain, status says "draining";
// a second SIGTERM ends serve at once with exit status 1, not by the
// signal (docs/architecture.md §10).
func TestServeDrainAndSecondSignal(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir, "--demo", "--shutdown-grace", "1h")
	startConnect(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var r result
	eventually.Within(30*time.Second, func() bool {
		r = runIn(t, p.env, "", "status", "--socket", p.socket)
		return strings.Contains(r.stdout, ", draining")
	})
	if r.status != 0 || !strings.Contains(r.stdout, ", draining (no new sessions; these are finishing): 1 session") {
		t.Fatalf("status while draining: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() || ws.ExitStatus() != 1 || !strings.Contains(p.stderr.String(), "second signal: exiting now") {
		t.Errorf("after the second signal: %v\n%s", p.cmd.ProcessState, p.stderr.String())
	}
}

// TestServeAlreadyRunningFirstLine: a second serve says only that another
// one runs; it never claims to start.
func TestServeAlreadyRunningFirstLine(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir)
	r := runIn(t, p.env, "", "serve", "--socket", p.socket)
	want := fmt.Sprintf("snodod serve: snodod is already running (socket %s answers); stop it or choose another daemon.socket\n", p.socket)
	if r.status != 1 || r.stderr != want {
		t.Errorf("second serve: status %d, stderr:\n%s\nwant 1 and exactly %q", r.status, r.stderr, want)
	}
	if status := p.stop(t); status != 0 || !strings.Contains(p.stderr.String(), `msg="snodod started"`) {
		t.Errorf("the first serve: status %d, does not say it started:\n%s", status, p.stderr.String())
	}
}

// TestConfigFileSpellings: check and print both take the file as their
// argument or with --config; check reports one line per bad entry of a
// list.
func TestConfigFileSpellings(t *testing.T) {
	dir := sockDir(t)
	file := filepath.Join(dir, "c.toml")
	os.WriteFile(file, []byte("[daemon]\nmax_sessions = 10\n"), 0o600)
	env := isolated(dir)
	for _, args := range [][]string{{"check", file}, {"check", "--config", file}} {
		if r := runIn(t, env, "", append([]string{"config"}, args...)...); r.status != 0 || r.stdout != "ok: "+file+"\n" {
			t.Errorf("config %q: %d %q %q", args, r.status, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{"print", file}, {"print", "--config", file}, {"print", "--json", file}} {
		if r := runIn(t, env, "", append([]string{"config"}, args...)...); r.status != 0 || !strings.Contains(r.stdout, "file "+file) {
			t.Errorf("config %q: %d\n%s%s", args, r.status, r.stdout, r.stderr)
		}
	}
	if r := runIn(t, env, "", "config", "check", "--config", file, filepath.Join(dir, "other.toml")); r.status != 2 || !strings.Contains(r.stderr, "names two files") {
		t.Errorf("two files: %d %q", r.status, r.stderr)
	}
	uids := filepath.Join(dir, "uids.toml")
	os.WriteFile(uids, []byte("[daemon]\nallowed_uids = [\"bob\", 1001]\n"), 0o600)
	r := runIn(t, env, "", "config", "check", uids)
	if want := "daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got \"bob\"\n"; r.status != 1 || r.stderr != want {
		t.Errorf("check uids: %d %q, want 1 and %q", r.status, r.stderr, want)
	}
}

// TestClientsFindDefaultDaemon: with the default socket paths, a client
// whose environment differs from the daemon's (an MCP client starts
// connect with a minimal one) still finds it in the other default
// directories.
func TestClientsFindDefaultDaemon(t *testing.T) {
	if _, err := os.Stat(fmt.Sprintf("/run/user/%d", os.Getuid())); err == nil {
		t.Skip("/run/user/<uid> exists: a daemon started without XDG_RUNTIME_DIR would listen in the user's own runtime directory")
	}
	dir := sockDir(t)
	var env []string
	for _, kv := range isolated(dir) {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	serveEnv := append(env, "TMPDIR="+dir) // the daemon: $TMPDIR/snodod-<uid>
	p := &serveProcess{stderr: new(bytes.Buffer), env: serveEnv}
	p.cmd = exec.Command(binary, "serve", "--demo")
	p.cmd.Env, p.cmd.Stderr = serveEnv, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.stop(t)
		}
	})
	clientEnv := append(env, "TMPDIR="+dir, "XDG_RUNTIME_DIR="+filepath.Join(dir, "elsewhere"))
	var r result
	eventually.Within(30*time.Second, func() bool { r = runIn(t, clientEnv, "", "status"); return r.status == 0 })
	if r.status != 0 || !strings.Contains(r.stdout, "0 sessions") {
		t.Fatalf("status: %d\n%s%s\nserve: %s", r.status, r.stdout, r.stderr, p.stderr.String())
	}
	r = runIn(t, clientEnv, lines(initLine), "connect")
	if r.status != 0 || !strings.HasPrefix(r.stdout, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Errorf("connect: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	if status := p.stop(t); status != 0 {
		t.Errorf("serve: %d\n%s", status, p.stderr.String())
	}
}
