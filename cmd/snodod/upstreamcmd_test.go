//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
)

// snodod upstream start|stop|restart NAME and snodod logs NAME [-f], run
// as processes against `snodod serve` hosting the fake upstream.

// startStderr is what the fake writes to stderr each time it starts.
const startStderr = 1000

// serveFake starts `snodod serve` with one mcpServers entry, "fake",
// started manually.
func serveFake(t *testing.T) *serveProcess {
	t.Helper()
	dir := sockDir(t)
	config := filepath.Join(dir, "snodod.toml")
	text := fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nargs = [\"-stderr-at-start\", \"%d\"]\nstart = \"manual\"\n", fakebuild.Build(t), startStderr)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServe(t, dir, "--config", config)
}

// fakeRow waits until snodod status --json shows the fake in state.
func fakeRow(t *testing.T, p *serveProcess, state string) control.Upstream {
	t.Helper()
	var last string
	var st control.Status
	if !eventually.Within(20*time.Second, func() bool {
		r := runIn(t, p.env, "", "status", "--json", "--socket", p.socket)
		last = r.stdout + r.stderr
		st = control.Status{}
		err := json.Unmarshal([]byte(r.stdout), &st)
		return err == nil && len(st.Upstreams) == 1 && st.Upstreams[0].State == state
	}) {
		t.Fatalf("the fake never became %s:\n%s", state, last)
	}
	return st.Upstreams[0]
}

// TestUpstreamCommand: each action returns once it is done and says what
// it did, with the new process's pid ("upstream restart memory" says
// "memory restarted (pid 24758)").
func TestUpstreamCommand(t *testing.T) {
	p := serveFake(t)
	fakeRow(t, p, control.StateStopped)
	run := func(args ...string) string {
		t.Helper()
		r := runIn(t, p.env, "", append(args, "--socket", p.socket)...)
		if r.status != 0 || r.stderr != "" {
			t.Fatalf("snodod %s: %d\n%s%s", strings.Join(args, " "), r.status, r.stdout, r.stderr)
		}
		return r.stdout
	}
	pidOf := func(out, verb string) int {
		t.Helper()
		var pid int
		if n, err := fmt.Sscanf(out, "fake "+verb+" (pid %d)\n", &pid); n != 1 || err != nil || fmt.Sprintf("fake %s (pid %d)\n", verb, pid) != out {
			t.Fatalf("upstream %s printed %q, want \"fake %s (pid N)\"", verb, out, verb)
		}
		return pid
	}
	first := pidOf(run("upstream", "start", "fake"), "started")
	// Done when it says so: status shows the pid it printed at once.
	if row := fakeRow(t, p, control.StateReady); row.PID != first {
		t.Errorf("status shows pid %d, start printed %d", row.PID, first)
	}
	second := pidOf(run("upstream", "restart", "fake"), "restarted")
	if second == first {
		t.Errorf("restart printed the old pid %d", first)
	}
	if row := fakeRow(t, p, control.StateReady); row.PID != second {
		t.Errorf("status shows pid %d, restart printed %d", row.PID, second)
	}
	if out := run("upstream", "stop", "fake"); out != "fake stopped\n" {
		t.Errorf("stop printed %q", out)
	}
	fakeRow(t, p, control.StateStopped)

	r := runIn(t, p.env, "", "upstream", "start", "nope", "--socket", p.socket)
	if want := `snodod upstream start: no such upstream: "nope"; the configured upstreams are fake` + "\n"; r.status != 1 || r.stderr != want {
		t.Errorf("start nope: %d %q, want 1 %q", r.status, r.stderr, want)
	}
}

func TestLogsCommand(t *testing.T) {
	p := serveFake(t)
	if r := runIn(t, p.env, "", "upstream", "start", "fake", "--socket", p.socket); r.status != 0 {
		t.Fatalf("start: %d %s", r.status, r.stderr)
	}
	fakeRow(t, p, control.StateReady)
	r := runIn(t, p.env, "", "logs", "fake", "--socket", p.socket)
	if n := strings.Count(r.stdout, "w"); r.status != 0 || n < startStderr-20 {
		t.Fatalf("logs: %d, %d bytes of stderr, want about %d\n%s", r.status, n, startStderr, r.stderr)
	}
	// Each line has its time, and the start is marked, with the pid
	// (docs/upstreams.md §8).
	pid := fakeRow(t, p, control.StateReady).PID
	stamp := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) `
	want := regexp.MustCompile(`^` + stamp + `--- snodod: starting fake \(instance all\) ---\n(` + stamp + `w+\n)+` + stamp + `--- snodod: fake ready \(pid ` + fmt.Sprint(pid) + `\) ---\n$`)
	if !want.MatchString(r.stdout) {
		t.Errorf("logs fake:\n%s\nwant the start marked, each line stamped, and the ready mark with pid %d", r.stdout, pid)
	}
	// Without a name: the daemon's own log.
	own := runIn(t, p.env, "", "logs", "--socket", p.socket)
	if own.status != 0 || !strings.Contains(own.stdout, `msg="snodod started"`) || !strings.Contains(own.stdout, `msg="upstream ready" upstream=fake instance=all pid=`+fmt.Sprint(pid)) {
		t.Errorf("logs (the daemon's): %d\n%s%s", own.status, own.stdout, own.stderr)
	}

	// -f prints the ring, then what the restarted server writes, until
	// interrupted.
	follow := exec.Command(binary, "logs", "fake", "-f", "--socket", p.socket)
	follow.Env = p.env
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	follow.Stderr = &stderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if follow.ProcessState == nil {
			follow.Process.Kill()
			follow.Wait()
		}
	})
	var mu sync.Mutex
	var printed int
	var followed bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := out.Read(buf)
			mu.Lock()
			printed += bytes.Count(buf[:n], []byte("w"))
			followed.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	awaitPrinted := func(want int, what string) {
		t.Helper()
		var n int
		if !eventually.Within(20*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			n = printed
			return n >= want
		}) {
			t.Fatalf("logs -f printed %d bytes, want %d (%s)\n%s", n, want, what, stderr.String())
		}
	}
	awaitPrinted(startStderr-20, "the ring")
	if r := runIn(t, p.env, "", "upstream", "restart", "fake", "--socket", p.socket); r.status != 0 {
		t.Fatalf("restart: %d %s", r.status, r.stderr)
	}
	awaitPrinted(2*startStderr-40, "the restarted server's stderr")
	mu.Lock()
	starts := strings.Count(followed.String(), "--- snodod: starting fake (instance all) ---")
	mu.Unlock()
	if starts != 2 {
		t.Errorf("logs -f shows %d start marks, want the first and the restart's", starts)
	}
	if err := follow.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-copied
	if err := follow.Wait(); err != nil || stderr.Len() != 0 {
		t.Errorf("logs -f after SIGINT: %v %s", err, stderr.String())
	}
}
