package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// helperTool is a [tools.NAME] entry running this test binary in a
// helper mode (exec_helper_test.go) with command's other elements and the
// extra fields.
func helperTool(t testing.TB, name, mode string, args []string, extra string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	command, _ := json.Marshal(append([]string{exe}, args...))
	// The race detector makes a program that exits 0 sleep a second first,
	// unless told not to.
	return fmt.Sprintf("[tools.%s]\ncommand = %s\nenv.%s = %q\nenv.GORACE = \"atexit_sleep_ms=0\"\n%s\n", name, command, helperVar, mode, extra)
}

// execHost serves the tools of text and returns a 2025-11-25 client.
func execHost(t testing.TB, dir, text string, extra ...string) *client {
	t.Helper()
	_, srv := newHost(t, loadConfig(t, dir, text, extra...), catalog.HostOptions{})
	return newClient(t, srv, "2025-11-25", `{}`)
}

// TestExecArgv proves that each value arrives as exactly one element of
// argv, whatever it holds, with arrays expanded and absent optionals
// removed.
func TestExecArgv(t *testing.T) {
	dir := t.TempDir()
	c := execHost(t, dir, helperTool(t, "argv", "argv",
		[]string{"--", "{{s}}", "pre {{s}} post", "{{arr}}", "{{opt}}", "--opt={{opt}}", "{{n}}", "{{x}}", "{{b}}", "", "{{def}}"}, `
input.s = { required = true }
input.arr = { type = "array" }
input.opt = {}
input.n = { type = "integer" }
input.x = { type = "number" }
input.b = { type = "boolean" }
input.def = { default = "the default" }`))
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"spaces and quotes", map[string]any{"s": `a b "c" 'd'`},
			[]string{"--", `a b "c" 'd'`, `pre a b "c" 'd' post`, "", "the default"}},
		{"shell syntax", map[string]any{"s": "; rm -rf x | y && z $(id) `id` $HOME * ?"},
			[]string{"--", "; rm -rf x | y && z $(id) `id` $HOME * ?", "pre ; rm -rf x | y && z $(id) `id` $HOME * ? post", "", "the default"}},
		{"newlines", map[string]any{"s": "a\nb\r\n"}, []string{"--", "a\nb\r\n", "pre a\nb\r\n post", "", "the default"}},
		{"leading dash", map[string]any{"s": "-rf", "opt": "--help"},
			[]string{"--", "-rf", "pre -rf post", "--help", "--opt=--help", "", "the default"}},
		{"unicode", map[string]any{"s": "héllo \u2028 🎉"}, []string{"--", "héllo \u2028 🎉", "pre héllo \u2028 🎉 post", "", "the default"}},
		{"empty strings", map[string]any{"s": "", "opt": "", "def": ""}, []string{"--", "", "pre  post", "", "--opt=", "", ""}},
		{"arrays", map[string]any{"s": "x", "arr": []string{"a b", "", "-c", "*"}},
			[]string{"--", "x", "pre x post", "a b", "", "-c", "*", "", "the default"}},
		{"empty array", map[string]any{"s": "x", "arr": []string{}}, []string{"--", "x", "pre x post", "", "the default"}},
		{"numbers and booleans", map[string]any{"s": "x", "n": -7, "x": json.RawMessage("2.50"), "b": false},
			[]string{"--", "x", "pre x post", "-7", "2.50", "false", "", "the default"}},
		// An integer reaches the program in its canonical form, however
		// the client wrote it (head once got '1.0'); a number
		// stays as written.
		{"integer 1.0", map[string]any{"s": "x", "n": json.RawMessage("1.0")}, []string{"--", "x", "pre x post", "1", "", "the default"}},
		{"integer 1e0", map[string]any{"s": "x", "n": json.RawMessage("1e0")}, []string{"--", "x", "pre x post", "1", "", "the default"}},
		{"integer 1E+2", map[string]any{"s": "x", "n": json.RawMessage("1E+2")}, []string{"--", "x", "pre x post", "100", "", "the default"}},
		{"integer 100e-2", map[string]any{"s": "x", "n": json.RawMessage("100e-2")}, []string{"--", "x", "pre x post", "1", "", "the default"}},
		{"integer -0.0", map[string]any{"s": "x", "n": json.RawMessage("-0.0")}, []string{"--", "x", "pre x post", "0", "", "the default"}},
		{"integer -12.000", map[string]any{"s": "x", "n": json.RawMessage("-12.000")}, []string{"--", "x", "pre x post", "-12", "", "the default"}},
		{"integer 0.5e1", map[string]any{"s": "x", "n": json.RawMessage("0.5e1")}, []string{"--", "x", "pre x post", "5", "", "the default"}},
		{"integer beyond int64", map[string]any{"s": "x", "n": json.RawMessage("1.2e20")}, []string{"--", "x", "pre x post", "120000000000000000000", "", "the default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := callTool(t, c, t.Context(), "argv", tc.args)
			var got []string
			if res.IsError || json.Unmarshal([]byte(res.text(t)), &got) != nil {
				t.Fatalf("result %+v", res)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("argv[1:] =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestExecNoShell: a value that a shell would run is only text.
func TestExecNoShell(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "x")
	c := execHost(t, dir, helperTool(t, "argv", "argv", []string{"{{a}}"}, "input.a = {}"))
	for _, value := range []string{"$(touch " + marker + ")", "`touch " + marker + "`", "; touch " + marker, "x && touch " + marker} {
		res := callTool(t, c, t.Context(), "argv", map[string]any{"a": value})
		if got := res.text(t); got != mustJSONString(t, []string{value}) {
			t.Errorf("argv = %s, want [%q]", got, value)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%q ran a command: %s exists", value, marker)
		}
	}
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExecStdinEnvCwd(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	c := execHost(t, dir, helperTool(t, "cat", "stdin", nil, "stdin = \"{{text}}|{{lines}}|{{opt}}\"\ninput.text = {}\ninput.lines = { type = \"array\" }\ninput.opt = {}")+
		helperTool(t, "env", "env", nil, "cwd = \"work\"\nenv.EXTRA = \"${SECRET:-none}\""), "NOT_INHERITED=1", "LANG=C.UTF-8")
	got := callTool(t, c, t.Context(), "cat", map[string]any{"text": "a $(b)\n", "lines": []string{"1", "2"}}).text(t)
	if got != "a $(b)\n|1\n2|" {
		t.Errorf("stdin = %q", got)
	}
	var env struct {
		Env []string
		Cwd string
	}
	mustDecode(t, []byte(callTool(t, c, t.Context(), "env", nil).text(t)), &env)
	// Besides its own, a run carries its process group's marker, by which
	// the processes it leaves behind are found (internal/proc).
	marker := slices.IndexFunc(env.Env, func(kv string) bool { return strings.HasPrefix(kv, proc.MarkerEnv+"=") })
	if marker < 0 {
		t.Fatalf("env = %q: no %s", env.Env, proc.MarkerEnv)
	}
	env.Env = slices.Delete(env.Env, marker, marker+1)
	slices.Sort(env.Env)
	want := []string{"EXTRA=none", "GORACE=atexit_sleep_ms=0", "HOME=" + dir, "LANG=C.UTF-8", "PATH=" + os.Getenv("PATH"), helperVar + "=env",
		"XDG_CONFIG_HOME=" + dir, "XDG_RUNTIME_DIR=/run/test"}
	if !slices.Equal(env.Env, want) || env.Cwd != work {
		t.Errorf("env = %q in %s, want %q in %s", env.Env, env.Cwd, want, work)
	}
}

func TestExecFailure(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("é", 1000) + strings.Repeat("z", 1000) + "the end" // 3007 bytes
	c := execHost(t, dir, helperTool(t, "fail", "fail", []string{"{{code}}", "{{stderr}}"}, "input.code = {}\ninput.stderr = {}"))
	res := callTool(t, c, t.Context(), "fail", map[string]any{"code": "3", "stderr": "boom\n"})
	if !res.IsError || len(res.Content) != 2 || res.Content[0].Text != "fail: exited with status 3\nstderr:\nboom" || res.Content[1].Text != "partial output" {
		t.Errorf("result = %+v", res)
	}
	res = callTool(t, c, t.Context(), "fail", map[string]any{"code": "1", "stderr": long})
	tail, _ := strings.CutPrefix(res.Content[0].Text, "fail: exited with status 1\nstderr:\n")
	if !res.IsError || len(tail) > catalog.StderrTailBytes || !strings.HasSuffix(tail, "zthe end") || !strings.HasPrefix(tail, "é") {
		t.Errorf("stderr tail of %d bytes: %q", len(tail), tail)
	}
}

func TestExecOutputLimit(t *testing.T) {
	dir := t.TempDir()
	c := execHost(t, dir, helperTool(t, "big", "big", []string{"{{n}}"}, "input.n = {}\nmax_output_bytes = 1000"))
	for _, tc := range []struct {
		n    int
		want string
	}{
		{999, strings.Repeat("x", 999)},
		{1000, strings.Repeat("x", 1000)},
		{1001, strings.Repeat("x", 1000) + "\n[output cut at 1000 bytes of 1001: raise tools.big.max_output_bytes to see more]"},
		{3 << 20, strings.Repeat("x", 1000) + "\n[output cut at 1000 bytes of 3145728: raise tools.big.max_output_bytes to see more]"},
	} {
		res := callTool(t, c, t.Context(), "big", map[string]any{"n": strconv.Itoa(tc.n)})
		if got := res.text(t); res.IsError || got != tc.want {
			t.Errorf("%d bytes: %d bytes back (isError %v), ending %q", tc.n, len(got), res.IsError, got[max(0, len(got)-90):])
		}
	}
}

func TestExecJSONOutput(t *testing.T) {
	dir := t.TempDir()
	c := execHost(t, dir, helperTool(t, "j", "json", []string{"{{out}}"}, "input.out = {}\noutput = \"json\"")+
		helperTool(t, "typed", "json", []string{"{{out}}"}, "input.out = {}\noutput = \"json\"\noutput_schema = { type = \"object\", required = [\"n\"] }"))
	for _, version := range []string{"2025-11-25", v2026} {
		cv := newClient(t, c.s, version, `{}`)
		raw, perr := cv.call(t.Context(), "tools/call", map[string]any{"name": "j", "arguments": map[string]any{"out": `{"n": 12345678901234567890, "s": "<&>"}`}})
		var res struct {
			StructuredContent map[string]any
			Content           []struct{ Text string }
			IsError           bool
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if perr != nil || dec.Decode(&res) != nil || res.IsError || fmt.Sprint(res.StructuredContent["n"]) != "12345678901234567890" ||
			res.StructuredContent["s"] != "<&>" || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "12345678901234567890") {
			t.Errorf("%s: %s %+v", version, raw, perr)
		}
	}
	if res := callTool(t, c, t.Context(), "j", map[string]any{"out": "not json"}); !res.IsError ||
		!strings.HasPrefix(res.text(t), `j: the output is not one JSON value (output = "json"): `) {
		t.Errorf("not JSON: %+v", res)
	}
	if res := callTool(t, c, t.Context(), "j", map[string]any{"out": "1 2"}); !res.IsError ||
		res.text(t) != `j: the output is not one JSON value (output = "json"): more than one JSON value` {
		t.Errorf("two values: %+v", res)
	}
	if res := callTool(t, c, t.Context(), "typed", map[string]any{"out": `{"n": 1}`}); res.IsError {
		t.Errorf("conforming: %+v", res)
	}
	if _, perr := c.call(t.Context(), "tools/call", map[string]any{"name": "typed", "arguments": map[string]any{"out": `{"m": 1}`}}); perr == nil ||
		perr.Code != protocol.CodeInternalError {
		t.Errorf("not conforming to output_schema: %+v", perr)
	}
}

func TestExecProgress(t *testing.T) {
	dir := t.TempDir()
	c := execHost(t, dir, helperTool(t, "p", "progress", []string{"3"}, "progress = true")+
		helperTool(t, "quiet", "progress", []string{"3"}, ""))
	r := &reporter{}
	res := callTool(t, c, server.WithProgress(t.Context(), r), "p", nil)
	if res.text(t) != "done" {
		t.Fatalf("result %+v", res)
	}
	var got []string
	for _, p := range r.all() {
		got = append(got, fmt.Sprintf("%v/%v %s", p.Progress, p.Total, p.Message))
	}
	if want := []string{"1/3 step 1", "2/3 step 2", "3/3 step 3"}; !slices.Equal(got, want) {
		t.Errorf("progress = %q, want %q (the line that is not JSON skipped)", got, want)
	}
	// Without progress = true there is no fd 3: the helper's writes fail
	// and nothing is reported.
	r = &reporter{}
	if res := callTool(t, c, server.WithProgress(t.Context(), r), "quiet", nil); res.text(t) != "done" || len(r.all()) != 0 {
		t.Errorf("without progress: %+v, %d reports", res, len(r.all()))
	}
}

// TestExecStopsTheGroup: a timeout and a cancellation end the whole
// process group, a grandchild that ignores SIGTERM included (SIGKILL
// after catalog.StopGrace).
func TestExecStopsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidsFile := filepath.Join(dir, "pids")
	c := execHost(t, dir, helperTool(t, "slow", "family", []string{pidsFile}, "timeout = \"200ms\"")+
		helperTool(t, "patient", "family", []string{pidsFile}, ""))

	res := callTool(t, c, t.Context(), "slow", nil)
	if !res.IsError || res.Content[0].Text != "slow: timed out after 200ms (tools.slow.timeout); its process group was stopped" {
		t.Errorf("timeout: %+v", res)
	}
	expectGone(t, readPids(t, pidsFile))

	os.Remove(pidsFile)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan server.Outcome, 1)
	go func() { done <- c.dispatch(ctx, "tools/call", map[string]any{"name": "patient"}) }()
	pids := awaitPids(t, pidsFile)
	cancel()
	select {
	case <-done:
	case <-time.After(catalog.StopGrace + 10*time.Second):
		t.Fatal("the cancelled call did not return")
	}
	expectGone(t, pids)
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		pids = append(pids, n)
	}
	if len(pids) != 2 {
		t.Fatalf("pids %q", b)
	}
	return pids
}

func awaitPids(t *testing.T, path string) []int {
	t.Helper()
	if !eventually.Within(30*time.Second, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && len(strings.Fields(string(b))) == 2
	}) {
		t.Fatal("the tool did not start its grandchild")
	}
	return readPids(t, path)
}

// expectGone fails unless every pid has exited (a zombie waiting for a
// reaper has exited).
func expectGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		eventually.True(t, fmt.Sprintf("process %d to exit", pid), func() bool { return !alive(pid) })
	}
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func TestExecMaxConcurrency(t *testing.T) {
	dir := t.TempDir()
	c := execHost(t, dir, helperTool(t, "gate", "gate", []string{dir}, "max_concurrency = 1"))
	done := make(chan toolResult, 2)
	for range 2 {
		other := newClient(t, c.s, "2025-11-25", `{}`) // a client sends one request at a time
		go func() { done <- callTool(t, other, t.Context(), "gate", nil) }()
	}
	started := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "started-*"))
		return len(m)
	}
	if !eventually.Within(30*time.Second, func() bool { return started() > 0 }) {
		t.Fatal("no run started")
	}
	time.Sleep(200 * time.Millisecond) // a second run would have started by now
	if n := started(); n != 1 {
		t.Fatalf("%d runs at once, want 1 (max_concurrency)", n)
	}
	write(t, dir, "release", "")
	for range 2 {
		if res := <-done; res.IsError {
			t.Errorf("result %+v", res)
		}
	}
	if n := started(); n != 2 {
		t.Errorf("%d runs in all, want 2", n)
	}
}

func TestExecCannotStart(t *testing.T) {
	dir := t.TempDir()
	prog := write(t, dir, "prog", "#!/bin/sh\necho hi\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	c := execHost(t, dir, "[tools.gone]\ncommand = [\""+prog+"\"]\n")
	if got := callTool(t, c, t.Context(), "gone", nil).text(t); got != "hi\n" {
		t.Fatalf("before: %q", got)
	}
	os.Remove(prog)
	res := callTool(t, c, t.Context(), "gone", nil)
	if !res.IsError || res.text(t) != "gone: cannot start "+prog+": no such file or directory" {
		t.Errorf("after the program was removed: %+v", res)
	}
}
