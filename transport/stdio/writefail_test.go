package stdio_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

type deadlineWriter interface {
	io.Writer
	SetWriteDeadline(time.Time) error
}

// countingWriter is the real device with its write calls counted.
type countingWriter struct {
	deadlineWriter
	writes atomic.Int32
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.deadlineWriter.Write(p)
}

// fill writes filler until the device's buffer is full, so the next write
// blocks as it would on a client that stopped reading. It returns the
// number of filler bytes.
func fill(t *testing.T, w deadlineWriter) int {
	t.Helper()
	chunk := []byte(strings.Repeat("f", 4096))
	total := 0
	w.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	defer w.SetWriteDeadline(time.Time{})
	for {
		n, err := w.Write(chunk)
		total += n
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			return total
		}
	}
}

// skipFiller reads the filler back and returns a reader positioned after it.
func skipFiller(t *testing.T, r io.Reader, n int) *bufio.Reader {
	t.Helper()
	br := bufio.NewReader(r)
	if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
		t.Fatal(err)
	}
	return br
}

// stalled serves with an output that is full and never drained by the test
// until it chooses to.
type stalled struct {
	t      *testing.T
	ep     endpoints
	out    *countingWriter
	filler int
	cat    *testCatalog
	exec   *executor.Executor
	served chan error
}

func startStalled(t *testing.T, open func(*testing.T) endpoints, tr stdio.Transport, limits executor.Limits) *stalled {
	t.Helper()
	ep := open(t)
	s := &stalled{t: t, ep: ep, cat: newTestCatalog(), served: make(chan error, 1)}
	s.out = &countingWriter{deadlineWriter: ep.out.(deadlineWriter)}
	s.filler = fill(t, s.out)
	s.out.writes.Store(0)
	exec, err := executor.New(limits)
	if err != nil {
		t.Fatal(err)
	}
	s.exec = exec
	tr.In, tr.Out, tr.Dispatcher, tr.Executor = ep.in, s.out, s.cat, exec
	go func() { s.served <- tr.Serve(t.Context()) }()
	t.Cleanup(func() {
		s.cat.Release()
		ep.closeAll()
		exec.Close()
	})
	return s
}

func (s *stalled) wait() error {
	s.t.Helper()
	select {
	case err := <-s.served:
		return err
	case <-time.After(10 * time.Second):
		s.t.Fatal("Serve did not return")
	}
	return nil
}

// Case 52: one attempted write, a timeout error, no retry, device open.
func TestWriteTimeoutIsTerminal(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		s := startStalled(t, open, stdio.Transport{Limits: limits.Limits{WriteTimeout: 30 * time.Millisecond}}, executor.Limits{})
		io.WriteString(s.ep.w, "{invalid}\n{also-invalid}\n")
		s.ep.closeInput()
		err := s.wait()
		if !errors.Is(err, stdio.ErrWriteTimeout) || err.Error() != "output failed: write timed out" {
			t.Fatalf("Serve returned %v", err)
		}
		if n := s.out.writes.Load(); n != 1 {
			t.Fatalf("%d writes attempted, want 1", n)
		}
		// The device is still open: the test can drain it, and what follows
		// the filler is at most a part of the first frame.
		br := skipFiller(t, s.ep.r, s.filler)
		if _, err := s.out.Write([]byte("still open\n")); err != nil {
			t.Fatalf("output was closed: %v", err)
		}
		rest, _ := br.ReadString('\n')
		rest = strings.TrimSuffix(rest, "still open\n")
		if !strings.HasPrefix(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`+"\n", rest) {
			t.Fatalf("unexpected output after the failure: %q", rest)
		}
		goleakCheck(t)
	})
}

// Case 53: a device error ends the connection; the device stays open.
func TestWriteErrorIsTerminal(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	ep := pipes(t)
	defer ep.closeAll()
	tr := &stdio.Transport{In: ep.in, Out: full, Dispatcher: newTestCatalog()}
	io.WriteString(ep.w, "{invalid}\n")
	err = tr.Serve(t.Context())
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Serve returned %v, want ENOSPC", err)
	}
	if _, err := full.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("device closed: %v", err)
	}
	ep.closeInput()
	goleakCheck(t)
}

// Case 54: a failed write cancels running work and drops queued work.
func TestWriteFailureCancelsWork(t *testing.T) {
	ep := pipes(t)
	cat := newTestCatalog()
	exec, _ := executor.New(executor.Limits{MaxConcurrency: 1, MaxQueue: 1})
	defer exec.Close()
	out := &countingWriter{deadlineWriter: ep.out.(deadlineWriter)}
	tr := &stdio.Transport{In: ep.in, Out: out, Dispatcher: cat, Executor: exec, Limits: limits.Limits{WriteTimeout: 40 * time.Millisecond}}
	served := make(chan error, 1)
	go func() { served <- tr.Serve(t.Context()) }()
	io.WriteString(ep.w, call("running", "block", `{}`)+"\n")
	<-cat.started
	io.WriteString(ep.w, req("queued", "tools/list", `{}`)+"\n")
	eventually.True(t, "one queued call", func() bool { return exec.Stats().Queued == 1 })
	fill(t, out)
	io.WriteString(ep.w, "{invalid}\n")
	if err := <-served; !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Serve returned %v", err)
	}
	if got := <-cat.ctxEnded; got != `"running"` {
		t.Fatalf("context ended for %s", got)
	}
	eventually.True(t, "nothing running or queued", func() bool { s := exec.Stats(); return s.Running == 0 && s.Queued == 0 })
	if _, ran := cat.ran.Load(idOf("queued")); ran {
		t.Fatal("queued work ran")
	}
	ep.closeAll()
	goleakCheck(t)
}

// Case 56: progress waits for the device; the order holds.
func TestProgressWaitsForSlowReader(t *testing.T) {
	s := startStalled(t, pipes, stdio.Transport{}, executor.Limits{})
	io.WriteString(s.ep.w, callWithToken(1, "counter", `{"n":2}`, `"c"`)+"\n")
	time.Sleep(100 * time.Millisecond)
	if n := s.out.writes.Load(); n != 1 {
		t.Fatalf("%d writes while the device is full, want 1", n)
	}
	br := skipFiller(t, s.ep.r, s.filler)
	for _, want := range []string{`"progress":1}`, `"progress":2}`, `"result"`} {
		l, err := br.ReadString('\n')
		if err != nil || !strings.Contains(l, want) {
			t.Fatalf("got %q, want %s", l, want)
		}
	}
	s.ep.closeInput()
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
}

// Case 57: EOF while a write is blocked: the write timeout still ends it.
func TestEOFWhileWriteBlocked(t *testing.T) {
	s := startStalled(t, pipes, stdio.Transport{Limits: limits.Limits{WriteTimeout: 200 * time.Millisecond}}, executor.Limits{})
	io.WriteString(s.ep.w, "{invalid}\n")
	s.ep.closeInput()
	if err := s.wait(); !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Serve returned %v", err)
	}
}

// A writer without deadlines: the blocked write is abandoned after the
// timeout, and the connection ends all the same.
func TestWriteTimeoutWithoutDeadlines(t *testing.T) {
	ep := pipes(t)
	pr, pw := io.Pipe() // never read until the end
	tr := &stdio.Transport{In: ep.in, Out: pw, Dispatcher: newTestCatalog(), Limits: limits.Limits{WriteTimeout: 30 * time.Millisecond}}
	io.WriteString(ep.w, "{invalid}\n")
	if err := tr.Serve(t.Context()); !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Serve returned %v", err)
	}
	pr.Close() // releases the abandoned write
	ep.closeAll()
	goleakCheck(t)
}

// Frames that are ready together go out in one write: five results that
// arrive while a write is blocked follow it in a single write, whole and
// each on its own line.
func TestReadyFramesShareAWrite(t *testing.T) {
	s := startStalled(t, pipes, stdio.Transport{}, executor.Limits{})
	for i := range 5 {
		io.WriteString(s.ep.w, call(i, "block", `{}`)+"\n")
		<-s.cat.started
	}
	io.WriteString(s.ep.w, "{invalid}\n")
	eventually.True(t, "the first write, blocked on the full device", func() bool { return s.out.writes.Load() == 1 })
	s.cat.Release()
	// The handlers return at once; their outcomes wait in the coordinator's
	// inbox while it is blocked. There is no signal for "delivered", so
	// give them ample time.
	time.Sleep(200 * time.Millisecond)
	br := skipFiller(t, s.ep.r, s.filler)
	if l, _ := br.ReadString('\n'); !strings.Contains(l, `"Parse error"`) {
		t.Fatalf("first line %q", l)
	}
	seen := map[string]bool{}
	for range 5 {
		l, err := br.ReadString('\n')
		if err != nil || !strings.Contains(l, `"text":"released"`) {
			t.Fatalf("got %q (%v), want a result", l, err)
		}
		seen[l] = true
	}
	if len(seen) != 5 {
		t.Fatalf("%d distinct results, want 5", len(seen))
	}
	if n := s.out.writes.Load(); n != 2 {
		t.Fatalf("%d writes, want 2: the blocked one and one for the five results", n)
	}
	s.ep.closeInput()
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
}
