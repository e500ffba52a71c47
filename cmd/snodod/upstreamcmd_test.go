//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/upstream"
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
func fakeRow(t *testing.T, p *serveProcess, state upstream.State) upstream.Status {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := runIn(t, p.env, "", "status", "--json", "--socket", p.socket)
		var st daemon.Status
		if err := json.Unmarshal([]byte(r.stdout), &st); err == nil && len(st.Upstreams) == 1 && st.Upstreams[0].State == state {
			return st.Upstreams[0]
		}
		last = r.stdout + r.stderr
	}
	t.Fatalf("the fake never became %s:\n%s", state, last)
	return upstream.Status{}
}

func TestUpstreamCommand(t *testing.T) {
	p := serveFake(t)
	fakeRow(t, p, upstream.StateStopped)
	run := func(args ...string) result {
		t.Helper()
		r := runIn(t, p.env, "", append(args, "--socket", p.socket)...)
		if r.status != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("snodod %s: %d\n%s%s", strings.Join(args, " "), r.status, r.stdout, r.stderr)
		}
		return r
	}
	run("upstream", "start", "fake")
	first := fakeRow(t, p, upstream.StateReady)
	run("upstream", "restart", "fake")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if row := fakeRow(t, p, upstream.StateReady); row.PID != first.PID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart kept pid %d", first.PID)
		}
	}
	run("upstream", "stop", "fake")
	fakeRow(t, p, upstream.StateStopped)

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
	fakeRow(t, p, upstream.StateReady)
	r := runIn(t, p.env, "", "logs", "fake", "--socket", p.socket)
	if n := strings.Count(r.stdout, "w"); r.status != 0 || n < startStderr-20 {
		t.Fatalf("logs: %d, %d bytes of stderr, want about %d\n%s", r.status, n, startStderr, r.stderr)
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
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := out.Read(buf)
			mu.Lock()
			printed += bytes.Count(buf[:n], []byte("w"))
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	awaitPrinted := func(want int, what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			n := printed
			mu.Unlock()
			if n >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("logs -f printed %d bytes, want %d (%s)\n%s", n, want, what, stderr.String())
			}
		}
	}
	awaitPrinted(startStderr-20, "the ring")
	if r := runIn(t, p.env, "", "upstream", "restart", "fake", "--socket", p.socket); r.status != 0 {
		t.Fatalf("restart: %d %s", r.status, r.stderr)
	}
	awaitPrinted(2*startStderr-40, "the restarted server's stderr")
	if err := follow.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-copied
	if err := follow.Wait(); err != nil || stderr.Len() != 0 {
		t.Errorf("logs -f after SIGINT: %v %s", err, stderr.String())
	}
}
