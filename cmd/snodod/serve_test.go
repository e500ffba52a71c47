//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// These tests run `snodod serve` and its clients as real processes.

// isolated returns an environment that reads no configuration file of the
// developer's, nor any SNODOD_* setting, and keeps its state (hosted
// servers' caches and process records) in dir, plus extra.
func isolated(dir string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SNODOD_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") && !strings.HasPrefix(kv, "LISTEN_") {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_STATE_HOME="+filepath.Join(dir, "state"), "GORACE=atexit_sleep_ms=10 exitcode=66")
	return append(env, extra...)
}

// sockDir returns a directory whose socket paths fit in 108 bytes.
func sockDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// runIn runs the binary with env and stdin, and waits for it.
func runIn(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run snodod %q: %v", args, err)
		}
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// serveProcess is a running `snodod serve`.
type serveProcess struct {
	cmd     *exec.Cmd
	socket  string
	control string
	stderr  *bytes.Buffer
	env     []string
}

// startServe starts `snodod serve --socket DIR/s.sock args...` and waits
// until it answers status requests.
func startServe(t *testing.T, dir string, args ...string) *serveProcess {
	t.Helper()
	p := &serveProcess{socket: filepath.Join(dir, "s.sock"), control: filepath.Join(dir, "control.sock"), stderr: new(bytes.Buffer), env: isolated(dir)}
	p.cmd = exec.Command(binary, append([]string{"serve", "--socket", p.socket}, args...)...)
	p.cmd.Env = p.env
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	var err error
	if !eventually.Within(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = (&control.Client{Socket: p.control}).Status(ctx)
		return err == nil
	}) {
		t.Fatalf("the daemon does not answer: %v\n%s", err, p.stderr.String())
	}
	return p
}

// stop sends SIGTERM and returns the exit status.
func (p *serveProcess) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode()
}

func TestServeConnectStatus(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir, "--demo", "--max-sessions", "4")

	// snodod connect, as an MCP client spawns it: its stdin and stdout
	// are pipes.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := exec.CommandContext(ctx, binary, "connect", "--socket", p.socket)
	conn.Env = p.env
	stdin, err := conn.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := conn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	conn.Stderr = &stderr
	if err := conn.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(stdin, lines(initLine, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"through connect"}}}`))
	scan := bufio.NewScanner(stdout)
	for _, prefix := range []string{`{"jsonrpc":"2.0","id":1,"result":{`, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"through connect"}]`} {
		if !scan.Scan() || !strings.HasPrefix(scan.Text(), prefix) {
			t.Fatalf("line %q (%v), want %s…\nconnect: %s\nserve: %s", scan.Text(), scan.Err(), prefix, stderr.String(), p.stderr.String())
		}
	}

	// The session shows in snodod status, as a table and as JSON.
	r := runIn(t, p.env, "", "status", "--socket", p.socket)
	if r.status != 0 || !strings.Contains(r.stdout, "1 session (max 4)") ||
		!strings.Contains(r.stdout, "ID  KIND  PID") || !strings.Contains(r.stdout, "2025-06-18") ||
		!strings.Contains(r.stdout, "executor: ") {
		t.Errorf("status: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	r = runIn(t, p.env, "", "status", "--json", "--socket", p.socket)
	var st control.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Sessions) != 1 || st.Sessions[0].Kind != "pipe" || st.Sessions[0].PeerPID != conn.Process.Pid {
		t.Errorf("status --json (%v): %s", err, r.stdout)
	}

	// End of input ends the session; connect exits 0.
	stdin.Close()
	for scan.Scan() {
		t.Errorf("unexpected line %s", scan.Text())
	}
	if err := conn.Wait(); err != nil {
		t.Errorf("connect: %v\n%s", err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("connect wrote to stderr: %s", stderr.String())
	}
	if status := p.stop(t); status != 0 {
		t.Errorf("serve exit status %d\n%s", status, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), `msg="drained; exiting"`) {
		t.Errorf("serve's log lacks the drain:\n%s", p.stderr.String())
	}
}

func TestConnectRelay(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir, "--demo")
	r := runIn(t, p.env, lines(initLine, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":100}}}`),
		"connect", "--relay", "--socket", p.socket)
	if r.status != 0 {
		t.Fatalf("exit status %d: %s", r.status, r.stderr)
	}
	got := frames(t, r.stdout)
	if got["1"] == nil || string(got["2"]["result"]) != `{"content":[{"type":"text","text":"done"}],"isError":false}` {
		t.Errorf("relay output:\n%s", r.stdout)
	}
}

// TestConnectNoDaemon: with --no-start, exit status 1 and one line naming
// where it looked and what to do; status never starts a daemon.
func TestConnectNoDaemon(t *testing.T) {
	dir := sockDir(t)
	sock := filepath.Join(dir, "s.sock")
	control := filepath.Join(dir, "control.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"connect", "--no-start", "--socket", sock},
			"snodod connect: no daemon answers at " + control + " (no such file or directory); start one with 'snodod serve', or leave out --no-start and connect starts it\n"},
		{[]string{"connect", "--relay", "--no-start", "--socket", sock},
			"snodod connect: no daemon answers at " + sock + " (no such file or directory); start one with 'snodod serve', or leave out --no-start and connect starts it\n"},
		{[]string{"status", "--socket", sock},
			"snodod status: cannot reach the daemon at " + control + ": no such file or directory; is snodod serve running?\n"},
	} {
		r := runIn(t, isolated(dir), "", tc.args...)
		if r.status != 1 || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("snodod %q: status %d, stderr %q\nwant 1 and %q", tc.args, r.status, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(control); err == nil {
		t.Errorf("a daemon was started: %s exists", control)
	}
}

// TestConnectDaemonDies kills the daemon during a session: connect exits 1
// with one line.
func TestConnectDaemonDies(t *testing.T) {
	dir := sockDir(t)
	p := startServe(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := exec.CommandContext(ctx, binary, "connect", "--socket", p.socket)
	conn.Env = p.env
	stdin, err := conn.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := conn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	conn.Stderr = &stderr
	if err := conn.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(stdin, lines(initLine))
	if !bufio.NewScanner(stdout).Scan() {
		t.Fatal("no answer")
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	go io.Copy(io.Discard, stdout)
	err = conn.Wait()
	want := fmt.Sprintf("snodod connect: the daemon at %s went away before the session ended (did it die?)\n", p.control)
	if conn.ProcessState.ExitCode() != 1 || stderr.String() != want {
		t.Errorf("connect: %v, stderr %q\nwant status 1 and %q", err, stderr.String(), want)
	}
}

func TestServeBadConfig(t *testing.T) {
	dir := sockDir(t)
	file := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(file, []byte("[session]\nwrite_timeout = \"0s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, isolated(dir), "", "serve", "--config", file, "--socket", filepath.Join(dir, "s.sock"), "--max-sessions", "many", "--log-level", "loud")
	want := `snodod serve: daemon.max_sessions: must be a positive integer, got "many" (flag --max-sessions)
snodod serve: log.level: must be "debug", "info", "warn" or "error", got "loud" (flag --log-level)
snodod serve: session.write_timeout: must be a positive duration, got "0s"
`
	if r.status != 1 || r.stderr != want {
		t.Errorf("status %d, stderr:\n%s\nwant 1 and\n%s", r.status, r.stderr, want)
	}
}

func TestConfigCheck(t *testing.T) {
	dir := sockDir(t)
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("[daemon]\nmax_sessions = 10\n"), 0o600)
	os.WriteFile(bad, []byte("session:\n  write_timout: 5s\n  max_line_bytes: -1\n"), 0o600)
	env := isolated(dir)

	r := runIn(t, env, "", "config", "check", good)
	if r.status != 0 || r.stdout != "ok: "+good+"\n" || r.stderr != "" {
		t.Errorf("check good: %d %q %q", r.status, r.stdout, r.stderr)
	}
	r = runIn(t, env, "", "config", "check", bad)
	want := "session.max_line_bytes: must be a positive integer, got -1\n" +
		`unknown key "session.write_timout"; did you mean "session.write_timeout"?` + "\n"
	if r.status != 1 || r.stderr != want || r.stdout != "" {
		t.Errorf("check bad: %d %q\nstderr:\n%s\nwant:\n%s", r.status, r.stdout, r.stderr, want)
	}
	r = runIn(t, env, "", "config", "check", filepath.Join(dir, "missing.toml"))
	if r.status != 1 || r.stderr != "config file "+filepath.Join(dir, "missing.toml")+": no such file or directory\n" {
		t.Errorf("check missing: %d %q", r.status, r.stderr)
	}
	// No file named and no default file: the defaults are fine.
	r = runIn(t, env, "", "config", "check")
	if r.status != 0 || !strings.HasPrefix(r.stdout, "ok: ") {
		t.Errorf("check default: %d %q %q", r.status, r.stdout, r.stderr)
	}
}

func TestConfigPrint(t *testing.T) {
	dir := sockDir(t)
	file := filepath.Join(dir, "c.toml")
	os.WriteFile(file, []byte("[daemon]\nmax_sessions = 10\n"), 0o600)
	env := isolated(dir, "SNODOD_SESSION__WRITE_TIMEOUT=2s")
	r := runIn(t, env, "", "config", "print", "--config", file)
	for _, want := range []string{
		"daemon.max_sessions = 10", "# file " + file,
		`session.write_timeout = "2s"`, "# env SNODOD_SESSION__WRITE_TIMEOUT",
		`log.level = "info"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config print lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runIn(t, env, "", "config", "print", "--json", "--config", file)
	var out map[string]struct {
		Value  any
		Source string
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out["daemon.max_sessions"].Source != "file "+file || out["session.write_timeout"].Value != "2s" {
		t.Errorf("config print --json (%v):\n%s", err, r.stdout)
	}
}

// TestStdioReadsConfig: snodod stdio reads the configuration, and its
// flags win over it.
func TestStdioReadsConfig(t *testing.T) {
	dir := sockDir(t)
	file := filepath.Join(dir, "c.toml")
	os.WriteFile(file, []byte("[server]\nname = \"configured\"\n[session]\nmax_line_bytes = 100\n"), 0o600)
	r := runIn(t, isolated(dir), lines(initLine), "stdio", "--config", file)
	if got := frames(t, r.stdout); r.status != 0 || !strings.Contains(string(got["null"]["error"]), "100-byte line limit") {
		t.Errorf("with the file's limit: %d\n%s\n%s", r.status, r.stdout, r.stderr)
	}
	r = runIn(t, isolated(dir), lines(initLine), "stdio", "--config", file, "--max-line-bytes", "5000")
	if got := frames(t, r.stdout); r.status != 0 || !strings.Contains(string(got["1"]["result"]), `"name":"configured"`) {
		t.Errorf("with the flag: %d\n%s\n%s", r.status, r.stdout, r.stderr)
	}
	r = runIn(t, isolated(dir, "SNODOD_LOG__LEVEL=loud"), "", "stdio")
	if r.status != 1 || r.stderr != "snodod stdio: log.level: must be \"debug\", \"info\", \"warn\" or \"error\", got \"loud\" (env SNODOD_LOG__LEVEL)\n" {
		t.Errorf("bad environment: %d %q", r.status, r.stderr)
	}
}

func TestHelpCommands(t *testing.T) {
	r := runIn(t, os.Environ(), "", "help")
	for _, name := range []string{"serve", "connect", "status", "kill", "config", "stdio", "version", "help"} {
		if !strings.Contains(r.stdout, "\n  "+name+" ") {
			t.Errorf("help lacks %s:\n%s", name, r.stdout)
		}
	}
	for _, tt := range []struct {
		cmd  []string
		want []string
	}{
		{[]string{"serve", "--help"}, []string{"Usage: snodod serve", "-demo", "-max-sessions", "-max-sessions integer", "(daemon.max_sessions: integer, default 1024)", "-socket", "-control-socket", "-log-level", "-write-timeout", "SIGHUP"}},
		{[]string{"connect", "--help"}, []string{"Usage: snodod connect", "-relay", "-no-start", "-control-socket", `{"command": "/home/me/.local/bin/snodod", "args": ["connect"]}`, "claude mcp add snodod -- snodod connect"}},
		// Plain `systemctl kill -s USR2` signals every process of the
		// unit, hosted servers included (docs/operations.md, "Under systemd").
		{[]string{"upgrade", "--help"}, []string{"Usage: snodod upgrade", "systemctl --user kill --kill-whom=main -s USR2 snodod", "legacy Streamable HTTP sessions end"}},
		{[]string{"logs", "--help"}, []string{"Usage: snodod logs [NAME]", "Without NAME it prints the daemon's own log", "each line after the time it was written"}},
		{[]string{"status", "--help"}, []string{"Usage: snodod status", "-json"}},
		{[]string{"kill", "--help"}, []string{"Usage: snodod kill [flags] ID", "-control-socket", "terminal it had in raw mode is restored"}},
		{[]string{"stdio", "--help"}, []string{"-cooked", "-demo", "-log-level", "-shutdown-grace"}},
		{[]string{"config", "--help"}, []string{"snodod config check [FILE | --config FILE]", "snodod config print [--json] [FILE | --config FILE]"}},
		{[]string{"help", "serve"}, []string{"Usage: snodod serve"}},
	} {
		r := runIn(t, os.Environ(), "", tt.cmd...)
		if strings.Contains(r.stdout, "systemctl kill -s USR2") {
			t.Errorf("snodod %q suggests systemctl kill without --kill-whom=main:\n%s", tt.cmd, r.stdout)
		}
		for _, w := range tt.want {
			if r.status != 0 || !strings.Contains(r.stdout, w) {
				t.Errorf("snodod %q: status %d, lacks %q:\n%s", tt.cmd, r.status, w, r.stdout)
			}
		}
	}
}
