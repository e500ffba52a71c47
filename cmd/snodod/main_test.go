//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the built binary as a real process, the way an MCP client
// spawns it.

// binary is the snodod binary built by TestMain.
var binary string

// raceBuild is set by race_test.go when the tests run under -race; the
// binary is then built with -race too.
var raceBuild bool

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(stdoutHelper())
	}
	dir, err := os.MkdirTemp("", "snodod-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "snodod")
	// No VCS stamp: the version is "dev" wherever the tests run.
	args := []string{"build", "-buildvcs=false", "-o", binary}
	if raceBuild {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// snododCmd returns a command running the binary. A race-built binary
// reports a race with exit status 66, and need not sleep a second before
// exiting as it does by default.
func snododCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10 exitcode=66")
	return cmd
}

type result struct {
	stdout, stderr string
	status         int
}

// runSnodod runs the binary with args and stdin, and waits for it to exit.
func runSnodod(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := snododCmd(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run snodod %q: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// frames parses stdout as newline-terminated JSON objects and indexes them
// by id (notifications by method and position).
func frames(t *testing.T, stdout string) map[string]map[string]json.RawMessage {
	t.Helper()
	if stdout != "" && !strings.HasSuffix(stdout, "\n") {
		t.Errorf("stdout does not end with a newline: %q", stdout)
	}
	byID := map[string]map[string]json.RawMessage{}
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var f map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &f); err != nil || f == nil {
			t.Fatalf("stdout line %d is not one JSON object (%v): %q", i+1, err, line)
		}
		key := string(f["id"])
		if key == "" {
			key = fmt.Sprintf("%s#%d", f["method"], i)
		}
		if _, dup := byID[key]; dup {
			t.Errorf("two lines for id %s", key)
		}
		byID[key] = f
	}
	return byID
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestStdioSession(t *testing.T) {
	r := runSnodod(t, lines(
		initLine,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	), "stdio", "--demo")
	if r.status != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", r.status, r.stderr)
	}
	got := frames(t, r.stdout)
	if len(got) != 3 || got["1"] == nil || got["2"] == nil || got["3"] == nil {
		t.Fatalf("stdout holds %d lines, want the results for ids 1, 2 and 3:\n%s", len(got), r.stdout)
	}
	for id, f := range got {
		if string(f["jsonrpc"]) != `"2.0"` || f["result"] == nil || f["error"] != nil {
			t.Errorf("id %s: not a result: %v", id, f)
		}
	}
	var init struct {
		ProtocolVersion string
		ServerInfo      struct{ Name string }
	}
	if json.Unmarshal(got["1"]["result"], &init); init.ProtocolVersion != "2025-06-18" || init.ServerInfo.Name != "snodod" {
		t.Errorf("initialize result %s", got["1"]["result"])
	}
	var list struct{ Tools []struct{ Name string } }
	json.Unmarshal(got["2"]["result"], &list)
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	// --demo adds the conformance fixture's tools too.
	for _, want := range []string{"big", "echo", "fail", "panic", "sleep", "status"} {
		if !names[want] {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	if want := `{"content":[{"type":"text","text":"hi"}],"isError":false}`; string(got["3"]["result"]) != want {
		t.Errorf("echo result %s, want %s", got["3"]["result"], want)
	}
	if !strings.Contains(r.stderr, "level=INFO") {
		t.Errorf("stderr holds no log lines:\n%s", r.stderr)
	}
}

// TestStdioWithoutDemo checks the default catalog: status only.
func TestStdioWithoutDemo(t *testing.T) {
	r := runSnodod(t, lines(
		initLine,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"status"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	), "stdio")
	got := frames(t, r.stdout)
	if r.status != 0 || len(got) != 3 {
		t.Fatalf("exit status %d, stdout:\n%s\nstderr:\n%s", r.status, r.stdout, r.stderr)
	}
	if !strings.Contains(string(got["2"]["result"]), `"text":"snodod dev, up `) {
		t.Errorf("status result %s", got["2"]["result"])
	}
	if want := `{"code":-32602,"message":"Unknown tool: echo"}`; string(got["3"]["error"]) != want {
		t.Errorf("echo without --demo: %s, want %s", got["3"]["error"], want)
	}
}

// TestStdioDemoCalls runs the other demo tools through the real process:
// a panic is answered and logged on stderr, never on stdout.
func TestStdioDemoCalls(t *testing.T) {
	r := runSnodod(t, lines(
		initLine,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fail"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"panic"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":250},"_meta":{"progressToken":"p"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"big","arguments":{"bytes":100000}}}`,
	), "stdio", "--demo")
	if r.status != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", r.status, r.stderr)
	}
	got := frames(t, r.stdout)
	if want := `{"content":[{"type":"text","text":"fail: this demo tool always fails, on purpose"}],"isError":true}`; string(got["2"]["result"]) != want {
		t.Errorf("fail: %s", got["2"]["result"])
	}
	if want := `{"code":-32603,"message":"Tool raised an exception"}`; string(got["3"]["error"]) != want {
		t.Errorf("panic: %s", got["3"]["error"])
	}
	if want := `{"content":[{"type":"text","text":"done"}],"isError":false}`; string(got["4"]["result"]) != want {
		t.Errorf("sleep: %s", got["4"]["result"])
	}
	if !strings.Contains(r.stdout, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":`) {
		t.Errorf("no progress for sleep 250 ms:\n%s", r.stdout)
	}
	if want := `{"type":"text","text":"` + strings.Repeat("x", 100000) + `"}`; !strings.Contains(string(got["5"]["result"]), want) {
		t.Errorf("big: %d bytes of result", len(got["5"]["result"]))
	}
	if !strings.Contains(r.stderr, `level=ERROR msg="tool handler panicked" tool=panic`) {
		t.Errorf("the panic is not logged on stderr:\n%s", r.stderr)
	}
}

// TestFlagErrors: serve and stdio read a limit flag the same way, as its
// configuration key, and refuse a bad value with the same line and exit
// status 2, a zero included.
func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want []string
		only string // the one command the row is for; "" both
	}{
		{[]string{"--max-line-bytes", "-1"}, []string{"session.max_line_bytes: must be a positive integer, got -1 (flag --max-line-bytes)"}, ""},
		{[]string{"--max-line-bytes", "0"}, []string{"session.max_line_bytes: must be a positive integer, got 0 (flag --max-line-bytes)"}, ""},
		{[]string{"--write-timeout", "-1s"}, []string{"session.write_timeout: must be a positive duration, got \"-1s\" (flag --write-timeout)"}, ""},
		{[]string{"--request-timeout", "5"}, []string{"session.request_timeout: must be a positive duration with a unit, such as \"30s\", got \"5\" (flag --request-timeout)"}, ""},
		{[]string{"--request-timeout=0s"}, []string{"session.request_timeout: must be a positive duration, got \"0s\" (flag --request-timeout)"}, ""},
		{[]string{"--max-concurrency", "-1"}, []string{"executor.max_concurrency: must be a positive integer, got -1 (flag --max-concurrency)"}, ""},
		{[]string{"--max-subscriptions", "-1"}, []string{"session.max_subscriptions: must be a positive integer, got -1 (flag --max-subscriptions)"}, ""},
		{[]string{"--max-queue", "-1", "--max-line-bytes", "ten"}, []string{
			"executor.max_queue: must be a positive integer, got -1 (flag --max-queue)",
			"session.max_line_bytes: must be a positive integer, got \"ten\" (flag --max-line-bytes)"}, ""},
		{[]string{"--log-level", "loud"}, []string{"log.level: must be \"debug\", \"info\", \"warn\" or \"error\", got \"loud\" (flag --log-level)"}, ""},
		{[]string{"--nope"}, []string{"flag provided but not defined: -nope"}, ""},
		{[]string{"extra"}, []string{`unexpected argument "extra"`}, "serve"},
		{[]string{"extra"}, []string{`no hosted server "extra": no mcpServers are configured`}, "stdio"},
		{[]string{"one", "two"}, []string{`takes at most one server name, got ["one" "two"]`}, "stdio"},
	}
	for _, cmd := range []string{"stdio", "serve"} {
		for _, tt := range tests {
			if tt.only != "" && tt.only != cmd {
				continue
			}
			t.Run(cmd+" "+strings.Join(tt.args, " "), func(t *testing.T) {
				dir := sockDir(t)
				args := append([]string{cmd, "--socket", filepath.Join(dir, "s.sock")}, tt.args...)
				if cmd == "stdio" {
					args = append([]string{cmd}, tt.args...)
				}
				r := runIn(t, isolated(dir), initLine+"\n", args...)
				if r.status != 2 || r.stdout != "" {
					t.Errorf("exit status %d, stdout %q; want 2 and nothing", r.status, r.stdout)
				}
				for _, w := range tt.want {
					if !strings.Contains(r.stderr, "snodod "+cmd+": "+w+"\n") {
						t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
					}
				}
				if !strings.Contains(r.stderr, "snodod "+cmd+" --help") {
					t.Errorf("stderr does not say where to look next:\n%s", r.stderr)
				}
			})
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runSnodod(t, "", args...)
		if r.status != 0 || r.stderr != "" {
			t.Errorf("snodod %s: exit status %d, stderr %q", args[0], r.status, r.stderr)
		}
		for _, line := range []string{
			"\n  stdio     serve one MCP session on this process's standard input and output\n",
			"\n  version   print the snodod version\n",
			"\n  help      show the commands",
		} {
			if !strings.Contains(r.stdout, line) {
				t.Errorf("snodod %s: help lacks %q:\n%s", args[0], line, r.stdout)
			}
		}
	}
	for _, args := range [][]string{{"stdio", "--help"}, {"help", "stdio"}} {
		r := runSnodod(t, "", args...)
		if r.status != 0 || !strings.HasPrefix(r.stdout, "Usage: snodod stdio [flags]") ||
			!strings.Contains(r.stdout, "-max-line-bytes integer\n") ||
			!strings.Contains(r.stdout, "its newline included (session.max_line_bytes: integer, default 2000000)") {
			t.Errorf("snodod %q: exit status %d, stdout:\n%s", args, r.status, r.stdout)
		}
	}
	// help's own help.
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"help", "help"}} {
		r := runSnodod(t, "", args...)
		if r.status != 0 || !strings.HasPrefix(r.stdout, "Usage: snodod help [command]") {
			t.Errorf("snodod %q: exit status %d, stdout:\n%s\nstderr:\n%s", args, r.status, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{}, {"bogus"}, {"help", "bogus"}} {
		r := runSnodod(t, "", args...)
		if r.status != 2 || !strings.Contains(r.stderr, "snodod help") {
			t.Errorf("snodod %q: exit status %d, stderr:\n%s", args, r.status, r.stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	want := fmt.Sprintf("snodod dev (%s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	// --version and -v as well as the command.
	for _, arg := range []string{"version", "--version", "-v"} {
		r := runSnodod(t, "", arg)
		if r.status != 0 || r.stdout != want {
			t.Errorf("snodod %s: exit status %d, stdout %q; want 0 and %q", arg, r.status, r.stdout, want)
		}
	}
}

// TestStdioSignal sends SIGTERM while a request runs and input is still
// open: the request finishes, its result is written, and the exit status
// is 0.
func TestStdioSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := snododCmd(ctx, "stdio", "--demo")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(stdin, lines(initLine, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":500},"_meta":{"progressToken":"p"}}}`))
	// The first progress notification shows that the sleep runs: a line
	// not yet admitted when the signal arrives is never served.
	scan := bufio.NewScanner(stdout)
	for _, prefix := range []string{`{"jsonrpc":"2.0","id":1,"result":`, `{"jsonrpc":"2.0","method":"notifications/progress"`} {
		if !scan.Scan() || !strings.HasPrefix(scan.Text(), prefix) {
			t.Fatalf("line %q (%v), want %s…", scan.Text(), scan.Err(), prefix)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var last string
	for scan.Scan() {
		last = scan.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v, stderr:\n%s", err, stderr.String())
	}
	if want := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}`; last != want {
		t.Errorf("after SIGTERM the last line is %q, want the sleep's result", last)
	}
}

// TestStdioOutputFailure closes the reading end of stdout: the first frame
// fails, and the process exits 1 with one line saying why.
func TestStdioOutputFailure(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := snododCmd(ctx, "stdio")
	cmd.Stdin = strings.NewReader(initLine + "\n")
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit: %v, stderr:\n%s", err, stderr.String())
	}
	last := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if line := last[len(last)-1]; !strings.HasPrefix(line, "snodod stdio: ") || !strings.Contains(line, "broken pipe") {
		t.Errorf("last stderr line %q, want the failure", line)
	}
}
