package stdio_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// Output waiting for a slow reader is bounded (docs/transport.md §11.5):
// per connection by MaxPendingOutputBytes, where a worker with a large
// answer waits without its executor slot, and for the daemon by the
// Budget its sessions share.

// bigFrame is the frame the test catalog's big tool answers id with for
// n bytes (each a NUL, six bytes escaped), its newline included.
func bigFrame(t *testing.T, id string, n int) int {
	t.Helper()
	b, err := protocol.AppendResult(nil, protocol.StringID(id), text(string(make([]byte, n))))
	if err != nil {
		t.Fatal(err)
	}
	if b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return len(b)
}

// toolFrame is the frame of the test catalog's tool ("big" or "plain",
// whose text is spliced) answering id with n bytes, its newline included.
func toolFrame(t *testing.T, tool, id string, n int) int {
	if tool == "big" {
		return bigFrame(t, id, n)
	}
	b, err := protocol.AppendResult(nil, protocol.StringID(id), text(strings.Repeat("x", n)))
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// pendingTools are the tools the bound is checked with, and the size of
// their answers: an escaped text, and one spliced into its frame.
var pendingTools = []struct {
	tool string
	n    int
}{{"big", 2000}, {"plain", protocol.SpliceMin}}

// smallSocketPair is socketPair with small socket buffers, as a client
// that set a small receive buffer: a few KiB fill it.
func smallSocketPair(t *testing.T) endpoints {
	ep := socketPair(t)
	for _, c := range []any{ep.out, ep.r} {
		raw, err := c.(*net.UnixConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}
	return ep
}

// TestPendingOutputBoundary pins max_pending_output_bytes at its exact
// boundary on a client that does not read: with room for exactly two
// answers, two are held and the third's worker waits, having given its
// executor slot back; with one byte less, one is held and the second
// waits, the third waiting too or, when the second held the connection
// before it started, queued. Once the client reads, every answer arrives
// whole and in order, and nothing is held any more.
func TestPendingOutputBoundary(t *testing.T) {
	for _, tool := range pendingTools {
		t.Run(tool.tool, func(t *testing.T) { testPendingOutputBoundary(t, tool.tool, tool.n) })
	}
}

func testPendingOutputBoundary(t *testing.T, tool string, n int) {
	f := toolFrame(t, tool, "a1", n) // larger than what commits without room
	for _, tt := range []struct {
		max     int
		held    int // answers held while the client does not read
		waiting int // workers waiting for room, without a slot
	}{
		{2 * f, 2, 1},
		{2*f - 1, 1, 2},
	} {
		t.Run(fmt.Sprint(tt.max), func(t *testing.T) {
			counters := &stdio.Counters{}
			s := startStalled(t, smallSocketPair, stdio.Transport{Counters: counters,
				Limits: limits.Limits{MaxPendingOutputBytes: tt.max, WriteTimeout: time.Minute}},
				executor.Limits{MaxConcurrency: 4})
			// One write, one read: the coordinator admits all three before
			// it writes (and then reads nothing while it writes).
			var lines string
			for _, id := range []string{"a1", "a2", "a3"} {
				lines += call(id, tool, fmt.Sprintf(`{"bytes":%d}`, n)) + "\n"
			}
			io.WriteString(s.ep.w, lines)
			// A held connection starts no new job (docs/transport.md
			// §11.5): a call not started when the first worker began to
			// wait stays queued rather than waiting too.
			settled := func() bool {
				st := s.exec.Stats()
				return counters.PendingOutput() == int64(tt.held*f) && st.Running == 0 && st.Detached >= 1 && st.Detached+st.Queued == tt.waiting
			}
			if !eventually.Within(10*time.Second, settled) {
				t.Fatalf("never settled: held %d bytes with the executor at %+v, want %d and %d detached or queued", counters.PendingOutput(), s.exec.Stats(), tt.held*f, tt.waiting)
			}
			time.Sleep(50 * time.Millisecond) // and nothing more is committed meanwhile
			if !settled() {
				t.Fatalf("held %d bytes with the executor at %+v, want %d and %d detached or queued", counters.PendingOutput(), s.exec.Stats(), tt.held*f, tt.waiting)
			}
			br := skipFiller(t, s.ep.r, s.filler)
			got := map[string]bool{}
			for range 3 {
				line, err := br.ReadString('\n')
				id, _, _ := strings.Cut(strings.TrimPrefix(line, `{"jsonrpc":"2.0","id":"`), `"`)
				if err != nil || len(line) != f {
					t.Fatalf("answer %s: %d bytes (%v), want %d", id, len(line), err, f)
				}
				got[id] = true
			}
			if !got["a1"] || !got["a2"] || !got["a3"] {
				t.Fatalf("answers %v, want a1, a2 and a3", got)
			}
			eventually.True(t, "no output held and no worker running", func() bool { return counters.PendingOutput() == 0 && s.exec.Stats() == executor.Stats{} })
			s.ep.closeInput()
			if err := s.wait(); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			goleakCheck(t)
		})
	}
}

// TestPendingOutputWaiterTimesOut: a worker waiting for room waits
// without its executor slot and holds its connection, so the connection's
// next call stays queued beside the free slot; the waiter keeps its
// request's deadline, and at request_timeout it is answered with the
// timeout error, as one waiting in its slot was. Its hold then ends and the
// queued call runs, and waits in its turn. Once the client reads, that one
// has its room, the answers arrive in order and nothing is held.
func TestPendingOutputWaiterTimesOut(t *testing.T) {
	const n, timeout = 2000, 2 * time.Second
	f := bigFrame(t, "a1", n)
	counters := &stdio.Counters{}
	s := startStalled(t, smallSocketPair, stdio.Transport{Counters: counters,
		Limits: limits.Limits{MaxPendingOutputBytes: f, WriteTimeout: time.Minute}},
		executor.Limits{MaxConcurrency: 1, RequestTimeout: timeout})
	var lines string
	for _, id := range []string{"a1", "a2", "a3"} {
		lines += call(id, "big", fmt.Sprintf(`{"bytes":%d}`, n)) + "\n"
	}
	io.WriteString(s.ep.w, lines)
	// a1 is held, a2 waits for room without the one slot, and a3 waits for
	// a2 although the slot is free.
	eventually.True(t, "a2 waiting without its slot and a3 queued", func() bool {
		return counters.PendingOutput() == int64(f) && s.exec.Stats() == executor.Stats{Detached: 1, Queued: 1}
	})
	// a2 times out (its error frame never waits), a3 runs and waits.
	eventually.True(t, "a3 waiting without its slot", func() bool {
		return counters.PendingOutput() > int64(f) && s.exec.Stats() == executor.Stats{Detached: 1}
	})
	br := skipFiller(t, s.ep.r, s.filler)
	timedOut := `"error":{"code":-32603,"message":"Request execution timed out"}}`
	for _, want := range []struct{ id, has string }{{"a1", `"result"`}, {"a2", timedOut}, {"a3", `"result"`}} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"`+want.id+`",`) || !strings.Contains(line, want.has) {
			t.Fatalf("answer %s: %.120q (%v), want %s", want.id, line, err, want.has)
		}
	}
	eventually.True(t, "no output held and no worker running", func() bool { return counters.PendingOutput() == 0 && s.exec.Stats() == executor.Stats{} })
	s.ep.closeInput()
	if err := s.wait(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	goleakCheck(t)
}

// TestPendingOutputWriteTimeout: a client that never reads loses its
// session at the write timeout; the workers waiting for room are let go
// at once, with nothing written for them, and the connection holds
// nothing.
func TestPendingOutputWriteTimeout(t *testing.T) {
	for _, tool := range pendingTools {
		t.Run(tool.tool, func(t *testing.T) { testPendingOutputWriteTimeout(t, tool.tool, tool.n) })
	}
}

func testPendingOutputWriteTimeout(t *testing.T, tool string, n int) {
	f := toolFrame(t, tool, "a1", n)
	counters := &stdio.Counters{}
	s := startStalled(t, smallSocketPair, stdio.Transport{Counters: counters,
		Limits: limits.Limits{MaxPendingOutputBytes: f, WriteTimeout: 200 * time.Millisecond}},
		executor.Limits{MaxConcurrency: 8})
	for i := range 8 {
		io.WriteString(s.ep.w, call(fmt.Sprintf("a%d", i), tool, fmt.Sprintf(`{"bytes":%d}`, n))+"\n")
	}
	if err := s.wait(); !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Serve returned %v, want the write timeout", err)
	}
	eventually.True(t, "an idle executor", func() bool { st := s.exec.Stats(); return st.Running == 0 && st.Queued == 0 })
	if got := counters.PendingOutput(); got != 0 {
		t.Fatalf("%d bytes held after the session ended", got)
	}
	s.ep.closeAll()
	goleakCheck(t)
}

// budgetConn serves the test catalog on a small socket pair whose input
// draws on b, as the daemon's sessions do.
type budgetConn struct {
	w      io.Writer
	r      *bufio.Reader
	served chan error
}

func serveOnBudget(t *testing.T, b *stdio.Budget, exec *executor.Executor, lim limits.Limits) *budgetConn {
	t.Helper()
	ep := smallSocketPair(t)
	reader := b.NewReader(ep.in, 0)
	cat := newTestCatalog()
	tr := &stdio.Transport{Reader: reader, Out: ep.out, Dispatcher: cat, Executor: exec, Limits: lim}
	c := &budgetConn{w: ep.w, r: bufio.NewReaderSize(ep.r, 1<<16), served: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { c.served <- tr.Serve(ctx) }()
	t.Cleanup(func() {
		ep.closeInput()
		cancel()
		<-c.served
		reader.Close()
		cat.Release()
		ep.closeAll()
	})
	return c
}

// TestPendingOutputSharedBudget: beside a client that never reads and
// pipelines large answers, a client that reads gets all of its answers,
// whole; the output both hold never passes the budget they share (beyond
// each connection's first 64 KiB, its own), the one that does not read
// loses its session at the write timeout, and then nothing is held.
func TestPendingOutputSharedBudget(t *testing.T) {
	const n = 40_000 // 240 KB frames, past the 64 KiB a connection holds on its own
	f := bigFrame(t, "a1", n)
	budget := stdio.NewBudget(3 * f)
	exec, err := executor.New(executor.Limits{MaxConcurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	lim := limits.Limits{MaxPendingOutputBytes: 2 * f, WriteTimeout: 2 * time.Second}
	stuck := serveOnBudget(t, budget, exec, lim)
	healthy := serveOnBudget(t, budget, exec, lim)
	// The requests are sent beside the test, not by it: a connection whose
	// coordinator is writing reads no more lines, and the small socket
	// fills (the stuck one's for good once its session ends).
	bigCalls := func(w io.Writer, prefix string, from, to int) chan struct{} {
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			for i := from; i < to; i++ {
				if _, err := io.WriteString(w, call(fmt.Sprintf("%s%d", prefix, i), "big", fmt.Sprintf(`{"bytes":%d}`, n))+"\n"); err != nil {
					return
				}
			}
		}()
		return sent
	}
	bigCalls(stuck.w, "s", 0, 20)
	eventually.True(t, "output charged to the budget", func() bool { return budget.Output() > 0 })
	for round := range 3 {
		sent := bigCalls(healthy.w, "h", round*10, round*10+10)
		for range 10 {
			line, err := healthy.r.ReadString('\n')
			id, _, _ := strings.Cut(strings.TrimPrefix(line, `{"jsonrpc":"2.0","id":"`), `"`)
			if err != nil || len(line) != bigFrame(t, id, n) {
				t.Fatalf("the healthy client: %d bytes (%v) %.40q, want a whole answer", len(line), err, line)
			}
		}
		<-sent
	}
	select {
	case err := <-stuck.served:
		if !errors.Is(err, stdio.ErrWriteTimeout) {
			t.Fatalf("the client that does not read: Serve returned %v", err)
		}
		stuck.served <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the client that does not read kept its session")
	}
	if hw, most := stdio.HighWater(budget), int64(3*f); hw > most {
		t.Errorf("the sessions held %d bytes of output at once, past the budget of %d", hw, most)
	}
	eventually.True(t, "nothing held in the budget", func() bool { return budget.Used() == 0 })
}

// TestPendingOutputCoordinator: the coordinator's own frames (here the
// errors of invalid lines) never wait for room, but past the limit it
// writes what is pending before it commits more, and reads no more lines
// meanwhile: a client that sends and never reads makes the connection
// hold at most the limit and one frame.
func TestPendingOutputCoordinator(t *testing.T) {
	const max = 10_000
	errFrame := len(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` + "\n")
	counters := &stdio.Counters{}
	s := startStalled(t, smallSocketPair, stdio.Transport{Counters: counters,
		Limits: limits.Limits{MaxPendingOutputBytes: max, WriteTimeout: time.Minute}}, executor.Limits{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		io.WriteString(s.ep.w, strings.Repeat("{invalid}\n", 5_000)) // blocks once the daemon stops reading
	}()
	eventually.True(t, "the limit held", func() bool { return counters.PendingOutput() > max-int64(errFrame) })
	time.Sleep(50 * time.Millisecond) // the coordinator writes, and commits nothing more
	if got := counters.PendingOutput(); got > max+int64(errFrame) {
		t.Fatalf("the connection holds %d bytes, past %d and one frame", got, max)
	}
	br := skipFiller(t, s.ep.r, s.filler)
	go io.Copy(io.Discard, br)
	<-sent
	s.ep.closeInput()
	if err := s.wait(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	s.ep.closeAll()
	goleakCheck(t)
}
