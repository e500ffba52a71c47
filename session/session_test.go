package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/transport/stdio"
)

var sessionClosed = errLine(`"b"`, -32603, "Session closed by server")

// A failed instance (an injected fault) answers its in-flight request -32603 and is
// restarted on the same device: a line pipelined during the restart is
// served, the legacy negotiated version survives, the client never sees a
// close.
func TestRestartKeepsTheConnection(t *testing.T) {
	leakCheck(t)
	cat := newCatalog(t)
	dev, end := pipeDevice(t, false, Peer{})
	s := New(8, dev, config(t, cat))
	run(t, s)
	c := newClient(t, end)

	c.send(initialize("2025-06-18"))
	if r := decode(t, c.next()); r.Result == nil || r.Result.ProtocolVersion != "2025-06-18" {
		t.Fatal("initialize failed")
	}
	c.send(lcall("b", "block", map[string]any{"name": "b"}))
	cat.waitStarted(t, "b")
	fault(s)
	c.send(line(3, "tools/list", map[string]any{})) // a legacy request: it needs the version
	if l := c.next(); l != sessionClosed {
		t.Fatalf("got %s\nwant %s", l, sessionClosed)
	}
	r := decode(t, c.next())
	if string(r.ID) != "3" || r.Result == nil || len(r.Result.Tools) == 0 || r.Result.ResultType != "" {
		t.Fatalf("want a legacy tools/list result for 3, got %+v", r)
	}
	st := s.Stats()
	if st.Restarts != 1 || st.Version != "2025-06-18" {
		t.Fatalf("Restarts %d, Version %q; want 1, 2025-06-18", st.Restarts, st.Version)
	}
	c.send(lcall(4, "echo", map[string]any{"text": "still here"}))
	if got := text(t, c.next(), "4"); got != "still here" {
		t.Fatalf("echo returned %q", got)
	}

	end.closeInput()
	waitDone(t, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	c.eof()
}

// More than RestartIntensity failures within RestartWindow end the session
// with one log line naming the session and the count, and close the device.
func TestTooManyFailuresEndTheSession(t *testing.T) {
	leakCheck(t)
	logs, logger := captureLogs()
	cfg := config(t, newCatalog(t))
	cfg.Logger, cfg.Limits.RestartIntensity, cfg.Limits.RestartWindow = logger, 2, time.Minute
	dev, end := pipeDevice(t, false, Peer{})
	s := New(9, dev, cfg)
	run(t, s)
	c := newClient(t, end)

	for range 3 {
		fault(s)
	}
	waitDone(t, s)
	if err := s.Err(); !errors.Is(err, ErrTooManyFailures) {
		t.Fatalf("Err() = %v, want ErrTooManyFailures", err)
	}
	if n := s.Stats().Restarts; n != 2 {
		t.Fatalf("Restarts = %d, want 2", n)
	}
	c.eof() // the device is closed

	var ends []map[string]any
	for _, r := range logs.records(t) {
		if strings.Contains(r["msg"].(string), "too often") {
			ends = append(ends, r)
		}
	}
	if len(ends) != 1 {
		t.Fatalf("%d end-of-session log lines, want 1: %v", len(ends), ends)
	}
	if e := ends[0]; e["level"] != "ERROR" || e["session"] != float64(9) || e["failures"] != float64(3) {
		t.Fatalf("log line %v: want level ERROR, session 9, failures 3", e)
	}
	faulted := make(chan struct{})
	go func() { fault(s); close(faulted) }()
	select {
	case <-faulted: // an ended session takes no fault, and does not block
	case <-time.After(10 * time.Second):
		t.Fatal("Fault blocked on an ended session")
	}
}

// A client that stops reading is cut off after WriteTimeout: its session
// ends with an output error and its device closed, while another session
// on the same executor goes on.
func TestSlowReaderIsCutOff(t *testing.T) {
	leakCheck(t)
	cfg := config(t, newCatalog(t))
	cfg.Limits.WriteTimeout = 100 * time.Millisecond
	// Blocking descriptors, as received over SCM_RIGHTS: the write
	// deadline only works because NewDevice made them non-blocking.
	devA, endA := pipeDevice(t, true, Peer{})
	devB, endB := pipeDevice(t, false, Peer{})
	a, b := New(10, devA, cfg), New(11, devB, cfg)
	run(t, a)
	run(t, b)
	cb := newClient(t, endB)

	// A's result is far larger than a pipe holds, and A never reads.
	if _, err := io.WriteString(endA.w, call(1, "fill", map[string]any{"n": 1 << 20})+"\n"); err != nil {
		t.Fatal(err)
	}
	cb.send(call(1, "echo", map[string]any{"text": "b1"}))
	text(t, cb.next(), "1")
	waitDone(t, a)
	var out *stdio.OutputError
	if err := a.Err(); !errors.As(err, &out) || !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Err() = %v, want an output timeout", err)
	}
	// The device is closed: the output ends after the part of the frame
	// the pipe took, and the frame was never retried.
	data, err := io.ReadAll(endA.r)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || len(data) >= 1<<20 || strings.Contains(string(data), "\n") || int64(len(data)) != a.Stats().BytesOut {
		t.Fatalf("read %d bytes after the cut-off (BytesOut %d)", len(data), a.Stats().BytesOut)
	}

	cb.send(call(2, "echo", map[string]any{"text": "b2"}))
	if got := text(t, cb.next(), "2"); got != "b2" {
		t.Fatalf("echo returned %q", got)
	}
	endB.closeInput()
	waitDone(t, b)
	if err := b.Err(); err != nil {
		t.Fatalf("the other session: %v", err)
	}
}

// Daemon shutdown (ctx's end): new requests are refused, a running one
// finishes within ShutdownGrace and its result is written, then the session
// ends and closes its device.
func TestShutdownDrains(t *testing.T) {
	leakCheck(t)
	cat := newCatalog(t)
	cfg := config(t, cat)
	cfg.Limits.ShutdownGrace = 10 * time.Second
	dev, end := pipeDevice(t, false, Peer{})
	s := New(12, dev, cfg)
	stop := run(t, s)
	c := newClient(t, end)

	c.send(call("b", "block", map[string]any{"name": "b"}))
	cat.waitStarted(t, "b")
	stop()
	// Once the shutdown has begun, new requests get -32603.
	for i := 0; ; i++ {
		id := fmt.Sprintf("p%d", i)
		c.send(call(id, "echo", map[string]any{"text": "x"}))
		l := c.next()
		if l == errLine(`"`+id+`"`, -32603, "Session closed by server") {
			break
		}
		text(t, l, `"`+id+`"`)
	}
	cat.Release()
	if got := text(t, c.next(), `"b"`); got != "released" {
		t.Fatalf("block returned %q", got)
	}
	waitDone(t, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	c.eof()
}

// A request still running when ShutdownGrace ends is answered -32603.
func TestShutdownGraceExpires(t *testing.T) {
	leakCheck(t)
	cat := newCatalog(t)
	cfg := config(t, cat)
	cfg.Limits.ShutdownGrace = 50 * time.Millisecond
	dev, end := pipeDevice(t, false, Peer{})
	s := New(13, dev, cfg)
	stop := run(t, s)
	c := newClient(t, end)

	c.send(call("b", "block", map[string]any{"name": "b"}))
	cat.waitStarted(t, "b")
	stop()
	if l := c.next(); l != sessionClosed {
		t.Fatalf("got %s\nwant %s", l, sessionClosed)
	}
	waitDone(t, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	c.eof()
}

func TestStats(t *testing.T) {
	leakCheck(t)
	cat := newCatalog(t)
	before := time.Now()
	dev, end := pipeDevice(t, false, Peer{PID: 4242, UID: 1000})
	s := New(7, dev, config(t, cat))
	if st := s.Stats(); st.ID != 7 || st.Kind != KindPipe || st.Peer != (Peer{4242, 1000}) ||
		st.Started.Before(before) || st.Started.After(time.Now()) || st.Version != "" ||
		st.InFlight != 0 || st.Subscriptions != 0 || st.Restarts != 0 || st.BytesIn != 0 || st.BytesOut != 0 {
		t.Fatalf("before Serve: %+v", st)
	}
	if got := s.String(); got != "session 7 (pipe, pid 4242)" {
		t.Fatalf("String() = %q", got)
	}
	run(t, s)
	c := newClient(t, end)

	c.send(initialize("2025-11-25"))
	c.next()
	c.send(call("b", "block", map[string]any{"name": "b"}))
	cat.waitStarted(t, "b")
	c.send(line("s", "subscriptions/listen", map[string]any{
		"notifications": map[string]any{"toolsListChanged": true}, "_meta": json.RawMessage(meta),
	}))
	if r := decode(t, c.next()); r.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("want the acknowledgement, got %+v", r)
	}
	eventually.True(t, "stats while busy", func() bool {
		st := s.Stats()
		return st.InFlight == 1 && st.Subscriptions == 1 &&
			st.BytesIn == c.bytesWritten() && st.BytesOut == c.bytesRead()
	})
	if st := s.Stats(); st.Version != "2025-11-25" || st.Restarts != 0 {
		t.Fatalf("while busy: %+v", st)
	}

	cat.Release()
	text(t, c.next(), `"b"`)
	eventually.True(t, "in flight drained", func() bool { return s.Stats().InFlight == 0 })
	end.closeInput() // the listen stream closes silently
	waitDone(t, s)
	st := s.Stats()
	if st.InFlight != 0 || st.Subscriptions != 0 || st.BytesIn != c.bytesWritten() || st.BytesOut != c.bytesRead() {
		t.Fatalf("after the end: %+v (client wrote %d, read %d)", st, c.bytesWritten(), c.bytesRead())
	}
}

// An invalid limit ends the session at once, with the error, the device
// closed; Serve never serves twice.
func TestInvalidConfigAndServeOnce(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Limits.MaxLineBytes = -1 }, "max_line_bytes must be a positive integer"},
		{func(c *Config) { c.Limits.RestartIntensity = -1 }, "restart_intensity must be a positive integer"},
	} {
		cfg := config(t, newCatalog(t))
		tc.set(&cfg)
		dev, end := pipeDevice(t, false, Peer{})
		s := New(14, dev, cfg)
		run(t, s)
		c := newClient(t, end)
		waitDone(t, s)
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Err() = %v, want %q", err, tc.want)
		}
		c.eof()
		if err := s.Serve(t.Context()); !errors.Is(err, suture.ErrDoNotRestart) {
			t.Fatalf("second Serve returned %v", err)
		}
	}
}

// Ended is called once, after Done, when the session has ended for good.
func TestEndedCallback(t *testing.T) {
	leakCheck(t)
	cfg := config(t, newCatalog(t))
	calls := make(chan *Session, 2)
	cfg.Ended = func(s *Session) {
		select {
		case <-s.Done():
		default:
			t.Error("Ended called before Done was closed")
		}
		calls <- s
	}
	dev, end := pipeDevice(t, false, Peer{})
	s := New(15, dev, cfg)
	run(t, s)
	c := newClient(t, end)
	end.closeInput()
	waitDone(t, s)
	c.eof()
	if got := <-calls; got != s {
		t.Fatalf("Ended got %v", got)
	}
	select {
	case <-calls:
		t.Fatal("Ended called twice")
	case <-time.After(50 * time.Millisecond):
	}
}
