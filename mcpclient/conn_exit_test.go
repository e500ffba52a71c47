package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// A crash mid-call answers every call in flight at once with the exit and
// the stderr tail (nothing is replayed: that is the supervisor's choice).
func TestCrashMidCall(t *testing.T) {
	c := startFake(t, Options{})
	slow := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		o := CallOptions{Progress: func(json.RawMessage) { close(running) }}
		_, err := c.Call(context.Background(), "tools/call", toolParams(t, "slow", map[string]any{"ms": 60000, "announce": true}, nil), o)
		slow <- err
	}()
	<-running
	_, err := c.Call(context.Background(), "tools/call", toolParams(t, "crash", map[string]any{"code": 3, "stderr": "panic: out of cheese"}, nil), CallOptions{})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Signal != 0 || !strings.Contains(ee.Stderr, "panic: out of cheese") {
		t.Fatalf("crash call = %#v, want exit status 3 with the stderr tail", err)
	}
	if err.Error() != "exited with status 3" {
		t.Errorf("Error() = %q", err.Error())
	}
	if err := <-slow; !errors.As(err, &ee) || ee.Code != 3 {
		t.Errorf("the other call in flight got %v, want the exit", err)
	}
	<-c.Done()
	if exitOf(c) == nil || exitOf(c).Code != 3 {
		t.Errorf("Exit = %v", exitOf(c))
	}
	if _, err := c.Call(context.Background(), "ping", nil, CallOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after the exit = %v, want ErrClosed", err)
	}
	if err := c.Notify("notifications/x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after the exit = %v, want ErrClosed", err)
	}
}

func TestStartFailures(t *testing.T) {
	t.Run("exit at start", func(t *testing.T) {
		proctest.Cleanup(t)
		err := checkStartFails(t, Options{}, "exited with status 1", "-exit-at-start", "1", "-exit-stderr", "error: no token")
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Stderr, "error: no token") {
			t.Errorf("Start = %#v, want the exit with its stderr", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := Connect(context.Background(), Command{Path: "snodod-no-such-server", Env: []string{"PATH=/nonexistent"}}, Options{Name: "x"})
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != -1 || !strings.Contains(err.Error(), "not found in the upstream's PATH (/nonexistent)") {
			t.Errorf("Start = %v, want not found naming the PATH", err)
		}
	})
	t.Run("start timeout", func(t *testing.T) {
		proctest.Cleanup(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := checkStartFailsCtx(t, ctx, Options{}, `upstream "" did not answer server/discover before the start timeout`, "-start-delay", "60s")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Start = %v, want it to wrap the deadline", err)
		}
	})
}

// 2 MB of stderr before the first answer, and a flood while the probe goes
// unanswered, never block the child: stderr is drained from the first byte.
func TestStderrFlood(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Options
		flags []string
	}{
		{"before answering", Options{}, []string{"-stderr-at-start", "2000000"}},
		{"during the probe", Options{ProbeTimeout: 100 * time.Millisecond}, []string{"-probe-stderr", "2000000", "-discover-error", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ring := NewStderrRing(nil, 0)
			cmd := fakeCommand(tt.flags...)
			cmd.Stderr = ring
			tt.cfg.Logger = slog.New(slog.DiscardHandler)
			c := startCommand(t, cmd, tt.cfg)
			if err := c.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := len(ring.Snapshot()); n != DefaultStderrRingBytes {
				t.Errorf("ring holds %d bytes, want it full (%d)", n, DefaultStderrRingBytes)
			}
		})
	}
}

// Stderr reaches the log line by line with upstream=NAME; stdout lines
// that are not JSON-RPC are logged as stderr and dropped.
func TestOutputHygiene(t *testing.T) {
	var log logBuffer
	ring := NewStderrRing(nil, 0)
	cmd := fakeCommand("-banner", "npm notice: a banner")
	cmd.Stderr = ring
	c := startCommand(t, cmd, Options{Name: "gh", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	callTool(t, c, "junk", map[string]any{"text": "console.log output"}, CallOptions{})
	callTool(t, c, "junk", map[string]any{"text": `{"not":"jsonrpc"}`}, CallOptions{})
	_, _ = c.Call(context.Background(), "tools/call", toolParams(t, "crash", nil, nil), CallOptions{})
	<-c.Done() // every line has been read
	if s := c.Stats().DroppedLines; s != 3 {
		t.Errorf("DroppedLines = %d, want 3", s)
	}
	for _, want := range []string{"npm notice: a banner", "console.log output"} {
		if !strings.Contains(string(ring.Snapshot()), want+"\n") {
			t.Errorf("ring lacks %q", want)
		}
		if !strings.Contains(log.String(), `msg="`+want+`" upstream=gh stream=stdout`) {
			t.Errorf("log lacks %q as stdout of upstream=gh:\n%s", want, log.String())
		}
	}
}

// A response over the line limit fails its call, wherever the upstream
// puts the id; a notification over the limit fails nothing.
func TestResponseTooLong(t *testing.T) {
	for _, idLast := range []bool{false, true} {
		t.Run(fmt.Sprintf("id last %v", idLast), func(t *testing.T) {
			var flags []string
			if idLast {
				flags = append(flags, "-id-last")
			}
			c := startFake(t, Options{MaxLineBytes: 4096, Logger: slog.New(slog.DiscardHandler)}, flags...)
			_, err := c.Call(context.Background(), "tools/call", toolParams(t, "big", map[string]any{"bytes": 100000}, nil), CallOptions{})
			if !errors.Is(err, ErrResponseTooLong) {
				t.Errorf("big answer = %v, want ErrResponseTooLong", err)
			}
			// At the limit exactly: the line and its newline are 4096 bytes.
			next := strconv.FormatInt(c.nextID.Load()+1, 10)
			small := callToolRaw(t, c, "big", map[string]any{"bytes": 4096 - len(bigEnvelope(idLast, next))})
			if len(small) == 0 {
				t.Error("a line of exactly the limit was refused")
			}
			callTool(t, c, "notify", map[string]any{"method": "notifications/message", "params": map[string]any{"data": strings.Repeat("n", 10000)}}, CallOptions{})
			if s := c.Stats().OversizeLines; s != 2 {
				t.Errorf("OversizeLines = %d, want 2", s)
			}
		})
	}
}

// bigEnvelope is the fake's answer to big without its text, plus the
// newline: what a line of the limit leaves for the text.
func bigEnvelope(idLast bool, id string) string {
	r := `{"content":[{"text":"","type":"text"}],"isError":false}`
	if idLast {
		return `{"result":` + r + `,"jsonrpc":"2.0","id":` + id + `}` + "\n"
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"result":` + r + `}` + "\n"
}

func callToolRaw(t *testing.T, c *Conn, name string, arguments any) []byte {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/call", toolParams(t, name, arguments, nil), CallOptions{})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// Stop's steps: stdin closed, then SIGTERM to the group, then SIGKILL; a
// grandchild that ignores SIGTERM dies with the group.
func TestStop(t *testing.T) {
	tests := []struct {
		name   string
		flags  []string
		ctx    func() (context.Context, context.CancelFunc)
		code   int
		signal syscall.Signal
	}{
		{"exits on end of input", nil, nil, 0, 0},
		{"needs SIGTERM", []string{"-ignore-eof"}, nil, -1, syscall.SIGTERM},
		{"needs SIGKILL", []string{"-ignore-eof", "-ignore-term"}, nil, -1, syscall.SIGKILL},
		{"ctx ended", []string{"-ignore-eof", "-ignore-term"}, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, -1, syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "gc")
			flags := append([]string{"-grandchild", pidfile}, tt.flags...)
			grace := time.Minute // a test that waits for it fails by timing out
			if tt.signal != 0 && tt.ctx == nil {
				grace = 20 * time.Millisecond
			}
			cmd := fakeCommand(flags...)
			cmd.StopGrace = grace
			c := startCommand(t, cmd, Options{Logger: slog.New(slog.DiscardHandler)})
			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatal(err)
			}
			gc, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			ctx := context.Background()
			if tt.ctx != nil {
				var cancel context.CancelFunc
				ctx, cancel = tt.ctx()
				defer cancel()
			}
			in := make(chan error, 1)
			go func() {
				_, err := c.Call(context.Background(), "tools/call", toolParams(t, "never", nil, nil), CallOptions{})
				in <- err
			}()
			eventually.True(t, "the call in flight", func() bool { return c.InFlight() == 1 })
			c.Stop(ctx)
			e := exitOf(c)
			if e == nil || e.Code != tt.code || e.Signal != tt.signal {
				t.Errorf("Exit = %v, want code %d signal %v", e, tt.code, tt.signal)
			}
			var ee *ExitError
			if err := <-in; !errors.As(err, &ee) {
				t.Errorf("call in flight = %v, want the *ExitError", err)
			}
			if _, err := c.Call(context.Background(), "ping", nil, CallOptions{}); !errors.Is(err, ErrClosed) {
				t.Errorf("Call after Stop = %v, want ErrClosed", err)
			}
			c.Stop(context.Background()) // again: returns at once
			eventually.True(t, "the grandchild's death", func() bool { return !proctest.Alive(gc) })
		})
	}
}

func TestStopConcurrent(t *testing.T) {
	cmd := fakeCommand("-ignore-eof")
	cmd.StopGrace = 20 * time.Millisecond
	c := startCommand(t, cmd, Options{})
	done := make(chan struct{})
	for range 3 {
		go func() {
			c.Stop(context.Background())
			done <- struct{}{}
		}()
	}
	for range 3 {
		<-done
	}
	if e := exitOf(c); e == nil || e.Signal != syscall.SIGTERM {
		t.Errorf("Exit = %v, want SIGTERM", e)
	}
}
