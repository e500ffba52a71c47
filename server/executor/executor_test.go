package executor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every blocking receive in these tests; it is a failure
// deadline, never a synchronisation device.
const wait = 10 * time.Second

// recorder collects handler starts and outcome deliveries in order.
type recorder struct {
	starts     chan string
	deliveries chan delivery
}

type delivery struct {
	name string
	out  server.Outcome
}

func newRecorder() *recorder {
	return &recorder{starts: make(chan string, 1024), deliveries: make(chan delivery, 1024)}
}

// fake is a controllable handler. It records its start, then returns out
// once released. When its context ends first it closes cancelled and
// returns, unless it is stubborn: then it goes on until released.
type fake struct {
	name      string
	rec       *recorder
	out       server.Outcome
	stubborn  bool
	panicWith any
	goexit    bool
	started   chan struct{}
	cancelled chan struct{}
	release   chan struct{}
	releaseMu sync.Once
}

func (r *recorder) blocking(name string) *fake {
	return &fake{name: name, rec: r, out: server.Outcome{Result: name},
		started: make(chan struct{}), cancelled: make(chan struct{}), release: make(chan struct{})}
}

func (r *recorder) instant(name string) *fake {
	f := r.blocking(name)
	f.Release()
	return f
}

func (f *fake) Release() { f.releaseMu.Do(func() { close(f.release) }) }

func (f *fake) run(ctx context.Context) server.Outcome {
	f.rec.starts <- f.name
	close(f.started)
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	if f.goexit {
		runtime.Goexit()
	}
	select {
	case <-f.release:
	case <-ctx.Done():
		close(f.cancelled)
		if f.stubborn {
			<-f.release
		}
	}
	return f.out
}

func (f *fake) done(o server.Outcome) { f.rec.deliveries <- delivery{f.name, o} }

func submit(c *Conn, id string, f *fake) *protocol.Error {
	return c.Submit(context.Background(), protocol.StringID(id), f.run, f.done)
}

func mustSubmit(t *testing.T, c *Conn, id string, f *fake) {
	t.Helper()
	if err := submit(c, id, f); err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
}

// refuse submits a handler that must not be admitted and checks the refusal.
func refuse(t *testing.T, c *Conn, id string, want *protocol.Error) {
	t.Helper()
	f := &fake{name: "refused " + id}
	if err := submit(c, id, f); err != want {
		t.Fatalf("submit %s = %v, want %v", id, err, want)
	}
}

func newExec(t *testing.T, l Limits) *Executor {
	t.Helper()
	e, err := New(l)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// expectDeliveries reads the next len(names) deliveries and checks their
// order and that each carries the handler's own result.
func expectDeliveries(t *testing.T, r *recorder, names ...string) {
	t.Helper()
	for _, want := range names {
		d := recv(t, r.deliveries, "delivery of "+want)
		if d.name != want || d.out.Err != nil || d.out.Result != want {
			t.Fatalf("delivery = %s %+v, want %s with its result", d.name, d.out, want)
		}
	}
}

func expectNoMoreDeliveries(t *testing.T, r *recorder) {
	t.Helper()
	if n := len(r.deliveries); n != 0 {
		t.Fatalf("%d unexpected deliveries, first %+v", n, <-r.deliveries)
	}
}

func expectStats(t *testing.T, what string, got, want Stats) {
	t.Helper()
	if got != want {
		t.Fatalf("%s stats = %+v, want %+v", what, got, want)
	}
}

func idle(t *testing.T, e *Executor) {
	t.Helper()
	eventually.True(t, "idle executor", func() bool { return e.Stats() == Stats{} })
}

// settle waits for e to be idle and checks nothing more was delivered.
func settle(t *testing.T, e *Executor, r *recorder) {
	t.Helper()
	idle(t, e)
	expectNoMoreDeliveries(t, r)
}

// nextStarts returns the names of the next n handlers to start.
func nextStarts(t *testing.T, r *recorder, n int) []string {
	t.Helper()
	var names []string
	for range n {
		names = append(names, recv(t, r.starts, "a start"))
	}
	return names
}

func TestExecutorLimits(t *testing.T) {
	const (
		conc  = "max_concurrency must be a positive integer"
		queue = "max_queue must be a positive integer"
		connQ = "the per-connection queue must not be negative"
		tmo   = "request_timeout must be a positive duration"
	)
	tests := []struct {
		name   string
		limits Limits
		want   Limits
		errs   []string
	}{
		{"zero means defaults", Limits{}, Limits{32, 256, 0, 30 * time.Second}, nil},
		{"set values kept", Limits{1, 2, 3, time.Millisecond}, Limits{1, 2, 3, time.Millisecond}, nil},
		{"negative concurrency", Limits{MaxConcurrency: -1}, Limits{}, []string{conc}},
		{"negative queue", Limits{MaxQueue: -1}, Limits{}, []string{queue}},
		{"negative timeout", Limits{RequestTimeout: -1}, Limits{}, []string{tmo}},
		{"negative connection queue", Limits{ConnQueue: -1}, Limits{}, []string{connQ}},
		{"all four", Limits{-1, -1, -1, -time.Second}, Limits{}, []string{conc, queue, connQ, tmo}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.limits)
			if verr := tt.limits.Validate(); fmt.Sprint(verr) != fmt.Sprint(err) {
				t.Fatalf("New error %v differs from Validate %v", err, verr)
			}
			if tt.errs != nil {
				if err == nil || err.Error() != strings.Join(tt.errs, "\n") || e != nil {
					t.Fatalf("New = %v, %v; want errors %q", e, err, tt.errs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Limits(); got != tt.want {
				t.Fatalf("Limits() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestExecutorAdmissionOrder(t *testing.T) {
	r := newRecorder()
	e := newExec(t, Limits{MaxConcurrency: 1, MaxQueue: 1})
	c := e.Conn()
	a := r.blocking("a")
	mustSubmit(t, c, "a", a)
	mustSubmit(t, c, "b", r.instant("b"))
	// Full: a duplicate is reported as such before the overload.
	refuse(t, c, "a", protocol.ErrDuplicateID)
	refuse(t, c, "c", protocol.ErrCapacity)
	e.Close()
	// Closed and full: overload before closed, duplicate before both.
	refuse(t, c, "c", protocol.ErrCapacity)
	refuse(t, c, "b", protocol.ErrDuplicateID)
	a.Release()
	expectDeliveries(t, r, "a", "b")
	refuse(t, c, "d", protocol.ErrExecutorClosed)
	idle(t, e)
}

// The examples of docs/transport.md §13.2 and §16 cases 30 and 31.
func TestExecutorSpecExamples(t *testing.T) {
	tests := []struct {
		queue    int
		admitted []string
		refused  string
	}{
		{queue: 1, admitted: []string{"a", "b"}, refused: "c"},
		{queue: 2, admitted: []string{"a", "b", "c"}, refused: "d"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("queue %d", tt.queue), func(t *testing.T) {
			r := newRecorder()
			e := newExec(t, Limits{MaxConcurrency: 1, MaxQueue: tt.queue})
			c := e.Conn()
			first := r.blocking(tt.admitted[0])
			mustSubmit(t, c, first.name, first)
			for _, name := range tt.admitted[1:] {
				mustSubmit(t, c, name, r.instant(name))
			}
			refuse(t, c, tt.refused, protocol.ErrCapacity)
			expectStats(t, "executor", e.Stats(), Stats{Running: 1, Queued: tt.queue})
			first.Release()
			expectDeliveries(t, r, tt.admitted...)
			if got := nextStarts(t, r, len(tt.admitted)); !slices.Equal(got, tt.admitted) {
				t.Fatalf("start order %v, want %v", got, tt.admitted)
			}
			settle(t, e, r)
		})
	}
}

func TestExecutorDuplicateKey(t *testing.T) {
	r := newRecorder()
	e := newExec(t, Limits{})
	c1, c2 := e.Conn(), e.Conn()
	a := r.blocking("a")
	mustSubmit(t, c1, "7", a)
	refuse(t, c1, "7", protocol.ErrDuplicateID)
	int7 := r.instant("int7")
	if err := c1.Submit(context.Background(), protocol.IntID(7), int7.run, int7.done); err != nil {
		t.Fatalf(`7 and "7" must differ: %v`, err)
	}
	expectDeliveries(t, r, "int7")
	mustSubmit(t, c2, "7", r.instant("other"))
	expectDeliveries(t, r, "other")
	a.Release()
	expectDeliveries(t, r, "a")
	mustSubmit(t, c1, "7", r.instant("reused")) // free once delivered
	expectDeliveries(t, r, "reused")
	idle(t, e)
}

func TestExecutorCancelQueued(t *testing.T) {
	r := newRecorder()
	e := newExec(t, Limits{MaxConcurrency: 1})
	c := e.Conn()
	a, b := r.blocking("a"), r.instant("b")
	mustSubmit(t, c, "a", a)
	mustSubmit(t, c, "b", b)
	c.Cancel(protocol.StringID("b"))
	c.Cancel(protocol.StringID("unknown")) // no-op
	expectStats(t, "conn", c.Stats(), Stats{Running: 1})
	mustSubmit(t, c, "b", r.instant("b again")) // the id is free at once
	a.Release()
	expectDeliveries(t, r, "a", "b again")
	if closed(b.started) {
		t.Fatal("cancelled queued work ran")
	}
	settle(t, e, r)
}

func TestExecutorCancelRunning(t *testing.T) {
	r := newRecorder()
	e := newExec(t, Limits{MaxConcurrency: 1})
	c := e.Conn()
	a, b := r.blocking("a"), r.instant("b")
	a.stubborn = true
	mustSubmit(t, c, "a", a)
	recv(t, a.started, "a to start")
	mustSubmit(t, c, "b", b)
	c.Cancel(protocol.StringID("a"))
	recv(t, a.cancelled, "a's context to end")
	// The key is free, the slot is not: b waits for a to return.
	expectStats(t, "executor", e.Stats(), Stats{Running: 1, Queued: 1})
	expectStats(t, "conn", c.Stats(), Stats{Queued: 1})
	mustSubmit(t, c, "a", r.instant("a again"))
	if closed(b.started) {
		t.Fatal("queued work started while the cancelled handler held the slot")
	}
	a.Release()
	expectDeliveries(t, r, "b", "a again") // nothing for the first a
	settle(t, e, r)
}

// A handler that panics (or leaves its goroutine) fails its request only:
// the key and slot are released and the executor keeps serving.
func TestExecutorHandlerFailure(t *testing.T) {
	tests := []struct {
		name    string
		set     func(*fake)
		wantLog []string
	}{
		{"panic", func(f *fake) { f.panicWith = "kaboom" },
			[]string{"level=ERROR", "request handler panicked", `id="\"p\""`, "kaboom", "executor_test.go"}},
		{"goexit", func(f *fake) { f.goexit = true },
			[]string{"level=ERROR", "request handler exited its goroutine", `id="\"p\""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Written by the worker before it delivers the outcome, and read
			// after the delivery is received: no lock needed.
			var logs bytes.Buffer
			old := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			t.Cleanup(func() { slog.SetDefault(old) })

			r := newRecorder()
			e := newExec(t, Limits{MaxConcurrency: 1})
			c := e.Conn()
			p := r.blocking("p")
			tt.set(p)
			mustSubmit(t, c, "p", p)
			mustSubmit(t, c, "queued", r.instant("queued"))
			p.Release()
			if d := recv(t, r.deliveries, "the failure"); d.name != "p" || d.out.Err != protocol.ErrWorkerFailed {
				t.Fatalf("delivery = %+v, want ErrWorkerFailed for p", d)
			}
			expectDeliveries(t, r, "queued")
			mustSubmit(t, c, "p", r.instant("next")) // key released, executor serving
			expectDeliveries(t, r, "next")
			for _, want := range tt.wantLog {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs.String())
				}
			}
			idle(t, e)
		})
	}
}

func TestExecutorCancelAll(t *testing.T) {
	r := newRecorder()
	e := newExec(t, Limits{MaxConcurrency: 1})
	ending, other := e.Conn(), e.Conn()
	a, b := r.blocking("a"), r.instant("b")
	mustSubmit(t, ending, "a", a)
	recv(t, a.started, "a to start")
	mustSubmit(t, ending, "b", b)
	mustSubmit(t, other, "x", r.instant("x"))
	ending.CancelAll()
	recv(t, a.cancelled, "a's context to end")
	expectStats(t, "ending conn", ending.Stats(), Stats{})
	expectDeliveries(t, r, "x")
	if closed(b.started) {
		t.Fatal("queued work of an ended connection ran")
	}
	mustSubmit(t, ending, "a", r.instant("a again"))
	expectDeliveries(t, r, "a again")
	settle(t, e, r)
}

func TestExecutorClose(t *testing.T) {
	r := newRecorder()
	e := newExec(t, Limits{MaxConcurrency: 1})
	c := e.Conn()
	a := r.blocking("a")
	mustSubmit(t, c, "a", a)
	mustSubmit(t, c, "b", r.instant("b"))
	e.Close()
	e.Close()
	refuse(t, c, "c", protocol.ErrExecutorClosed)
	a.Release()
	expectDeliveries(t, r, "a", "b")
	settle(t, e, r)
}

func TestExecutorContext(t *testing.T) {
	type key struct{}
	e := newExec(t, Limits{})
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	started, release := make(chan struct{}), make(chan struct{})
	run := func(ctx context.Context) server.Outcome {
		close(started)
		<-release
		_, hasDeadline := ctx.Deadline()
		return server.Outcome{Result: fmt.Sprintf("%v %v %v", ctx.Value(key{}), ctx.Err(), hasDeadline)}
	}
	outs := make(chan server.Outcome, 1)
	if err := e.Conn().Submit(parent, protocol.IntID(1), run, func(o server.Outcome) { outs <- o }); err != nil {
		t.Fatal(err)
	}
	recv(t, started, "start")
	cancelParent()
	close(release)
	if o := recv(t, outs, "outcome"); o.Result != "v <nil> false" {
		t.Fatalf("handler saw value, err, deadline = %v; want v <nil> false", o.Result)
	}
	idle(t, e)
}

// TestExecutorStress mixes connections, cancellations and completions and
// checks that every submission gets at most one outcome, every one not
// cancelled gets exactly one, and the executor ends idle.
func TestExecutorStress(t *testing.T) { executorStress(t, nil) }

// executorStress is TestExecutorStress with first, when not nil, called
// by the handler of the i-th submission of each connection before it does
// anything else.
func executorStress(t *testing.T, first func(ctx context.Context, i int)) {
	const conns, perConn = 8, 200
	e := newExec(t, Limits{MaxConcurrency: 4, MaxQueue: 64})
	var delivered [conns][perConn]atomic.Int32
	var cancelled [conns][perConn]bool
	var wg sync.WaitGroup
	for n := range conns {
		wg.Go(func() {
			c := e.Conn()
			for i := range perConn {
				id := protocol.IntID(int64(i))
				run := func(ctx context.Context) server.Outcome {
					if first != nil {
						first(ctx, i)
					}
					if i%7 == 0 {
						<-ctx.Done() // only ends by cancellation
					}
					return server.Outcome{Result: i}
				}
				done := func(server.Outcome) { delivered[n][i].Add(1) }
				for c.Submit(context.Background(), id, run, done) != nil {
					runtime.Gosched() // overloaded: retry
				}
				if i%7 == 0 || i%5 == 0 {
					c.Cancel(id)
					cancelled[n][i] = true
				}
			}
		})
	}
	wg.Wait()
	eventually.True(t, "every outcome delivered", func() bool {
		for n := range conns {
			for i := range perConn {
				if delivered[n][i].Load() == 0 && !cancelled[n][i] {
					return false
				}
			}
		}
		return e.Stats() == Stats{}
	})
	for n := range conns {
		for i := range perConn {
			if got := delivered[n][i].Load(); got > 1 || (got == 0 && !cancelled[n][i]) {
				t.Errorf("conn %d id %d: %d outcomes (cancelled %v)", n, i, got, cancelled[n][i])
			}
		}
	}
}
