package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// The hosted-server faults of the fault suite (docs/upstreams.md §7), at the
// layer that runs one server (the Conn), each with a second Conn beside it
// standing for the daemon's other sessions: it must be unharmed. The faults
// that need the supervisor (a server that exits at once on every start is
// backed off, then failed) wait for hosting in the daemon.

// besideFake is a second fake upstream whose calls must keep working
// while the first one misbehaves. The check it returns calls it, then
// stops it: each test's process check (startFake) finds no child left.
func besideFake(t *testing.T) (check func()) {
	t.Helper()
	other := startFake(t, Options{Name: "other"})
	return func() {
		t.Helper()
		if got := callTool(t, other, "echo", map[string]any{"still": "served"}, CallOptions{}); string(got["arguments"]) != `{"still":"served"}` {
			t.Errorf("the other upstream's echo: %s", got["arguments"])
		}
		stop(other)
	}
}

// TestKilledMidCall: a server killed with SIGKILL while calls are in
// flight fails them at once with the signal, and the Conn ends.
func TestKilledMidCall(t *testing.T) {
	check := besideFake(t)
	c := startFake(t, Options{})
	errs := make(chan error, 3)
	running := make(chan struct{}, 3)
	for range 3 {
		go func() {
			o := CallOptions{Progress: func(json.RawMessage) { running <- struct{}{} }}
			_, err := c.Call(context.Background(), "tools/call", toolParams(t, "slow", map[string]any{"ms": 60000, "announce": true}, nil), o)
			errs <- err
		}()
	}
	for range 3 {
		<-running
	}
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var ee *ExitError
		if err := <-errs; !errors.As(err, &ee) || ee.Signal != syscall.SIGKILL {
			t.Errorf("a call in flight got %v, want the SIGKILL", err)
		}
	}
	<-c.Done()
	check()
}

// TestStderrFlood50MB: 50 MB of stderr during a call is drained while the
// call is answered; the ring keeps only its last bytes.
func TestStderrFlood50MB(t *testing.T) {
	check := besideFake(t)
	ring := NewStderrRing(nil, 0)
	cmd := fakeCommand()
	cmd.Stderr = ring
	c := startCommand(t, cmd, Options{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Call(ctx, "tools/call", toolParams(t, "stderr", map[string]any{"bytes": 50 << 20}, nil), CallOptions{}); err != nil {
		t.Fatalf("the call that floods stderr: %v", err)
	}
	if n := len(ring.Snapshot()); n != DefaultStderrRingBytes {
		t.Errorf("the ring holds %d bytes, want its size %d", n, DefaultStderrRingBytes)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("after the flood: %v", err)
	}
	check()
}

// TestTenMegabyteLine: a 10 MB answer, five times the default line limit,
// fails its call with ErrResponseTooLong without being kept, and the next
// call is answered: the reader stays in step.
func TestTenMegabyteLine(t *testing.T) {
	check := besideFake(t)
	c := startFake(t, Options{})
	_, err := c.Call(context.Background(), "tools/call", toolParams(t, "big", map[string]any{"bytes": 10_000_000}, nil), CallOptions{})
	if !errors.Is(err, ErrResponseTooLong) {
		t.Fatalf("a 10 MB answer: %v, want ErrResponseTooLong", err)
	}
	if got := callTool(t, c, "echo", map[string]any{"after": "the long line"}, CallOptions{}); string(got["arguments"]) != `{"after":"the long line"}` {
		t.Errorf("the next call: %s", got["arguments"])
	}
	if n := c.Stats().OversizeLines; n != 1 {
		t.Errorf("OversizeLines = %d, want 1", n)
	}
	check()
}

// TestNeverAnswers: a call to a server that never answers ends with its
// caller's deadline, the server is told (notifications/cancelled), and
// the server still answers other calls.
func TestNeverAnswers(t *testing.T) {
	check := besideFake(t)
	c := startFake(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, "tools/call", toolParams(t, "never", nil, nil), CallOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call never answered: %v, want the caller's deadline", err)
	}
	if c.InFlight() != 0 {
		t.Errorf("%d calls in flight after the deadline", c.InFlight())
	}
	var history struct {
		Cancelled []struct{ RequestID json.RawMessage }
	}
	raw, _ := json.Marshal(callTool(t, c, "history", nil, CallOptions{}))
	if err := json.Unmarshal(raw, &history); err != nil || len(history.Cancelled) != 1 {
		t.Errorf("the server saw cancellations %s, want one", raw)
	}
	check()
}
