package executor

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// HoldConn (docs/transport.md §11.5): a handler waiting on its own
// connection gives its slot back, and none of that connection's work
// starts until its last hold is released, while other connections' work
// takes the slots. These tests run on synctest's clock, so "nothing
// started" is checked once every goroutine is blocked.

// holder is a handler of connection A that holds A once let through and
// returns once its hold is released.
type holder struct {
	name           string
	gate, released chan struct{} // closed by the test
	held           chan struct{} // closed by the handler once HoldConn returned
	out            chan server.Outcome
}

func newHolder(name string) *holder {
	return &holder{name: name, gate: make(chan struct{}), released: make(chan struct{}),
		held: make(chan struct{}), out: make(chan server.Outcome, 1)}
}

func (h *holder) run(ctx context.Context) server.Outcome {
	<-h.gate
	release := HoldConn(ctx)
	close(h.held)
	<-h.released
	release()
	release() // a second call does nothing
	return server.Outcome{Result: h.name}
}

// startedNow drains the starts recorded so far, once every goroutine of
// the bubble is blocked.
func startedNow(r *recorder) []string {
	synctest.Wait()
	var got []string
	for len(r.starts) > 0 {
		got = append(got, <-r.starts)
	}
	return got
}

func TestExecutorHeldConnection(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		// holders is how many of A's handlers hold A; before are submitted
		// behind them, after while A is held, each a connection's letter
		// and a name; a trailing "!" is a submission refused for capacity.
		holders       int
		before, after []string
		// whileHeld start while A is held (after its holders let go of
		// their slots); released once the last hold is released; in this
		// order with one slot, else in any (they start side by side).
		whileHeld, released []string
	}{
		{
			name:      "another connection takes the slot; the held one's queue waits",
			limits:    Limits{MaxConcurrency: 1},
			holders:   1,
			before:    []string{"A1", "B1", "A2"},
			after:     []string{"B2"},
			whileHeld: []string{"B1", "B2"},
			released:  []string{"A1", "A2"},
		},
		{
			name:      "the held connection's new work queues beside a free slot",
			limits:    Limits{MaxConcurrency: 2},
			holders:   1,
			after:     []string{"A1", "B1"},
			whileHeld: []string{"B1"},
			released:  []string{"A1"},
		},
		{
			name:      "held until its last hold is released",
			limits:    Limits{MaxConcurrency: 2},
			holders:   2,
			before:    []string{"A1"},
			after:     []string{"B1", "A2"},
			whileHeld: []string{"B1"},
			released:  []string{"A1", "A2"},
		},
		{
			name:      "the held connection's work waits in queue places, refused when they are full",
			limits:    Limits{MaxConcurrency: 2, MaxQueue: 1},
			holders:   1,
			after:     []string{"A1", "A2!", "B1"},
			whileHeld: []string{"B1"},
			released:  []string{"A1"},
		},
		{
			name:     "nothing else queued: the hold changes no order",
			limits:   Limits{MaxConcurrency: 1},
			holders:  1,
			before:   []string{"A1", "A2"},
			released: []string{"A1", "A2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRecorder()
				e := newExec(t, tt.limits)
				conns := map[string]*Conn{"A": e.Conn(), "B": e.Conn()}
				holders := make([]*holder, tt.holders)
				for i := range holders {
					h := newHolder(fmt.Sprint("holder", i))
					holders[i] = h
					if err := conns["A"].Submit(context.Background(), protocol.StringID(h.name), h.run, func(o server.Outcome) { h.out <- o }); err != nil {
						t.Fatalf("submit %s: %v", h.name, err)
					}
				}
				var fakes []string // admitted, to be delivered
				submitAll := func(names []string) {
					t.Helper()
					for _, name := range names {
						if refused, ok := strings.CutSuffix(name, "!"); ok {
							refuse(t, conns[name[:1]], refused, protocol.ErrCapacity)
							continue
						}
						mustSubmit(t, conns[name[:1]], name, r.instant(name))
						fakes = append(fakes, name)
					}
				}
				submitAll(tt.before)
				for _, h := range holders {
					close(h.gate)
					<-h.held
				}
				submitAll(tt.after)
				started := func() []string {
					got := startedNow(r)
					if tt.limits.MaxConcurrency > 1 {
						slices.Sort(got)
					}
					return got
				}
				if got := started(); !slices.Equal(got, tt.whileHeld) {
					t.Fatalf("started while A is held: %v, want %v", got, tt.whileHeld)
				}
				if want := (Stats{Detached: tt.holders, Queued: len(tt.released)}); e.Stats() != want {
					t.Fatalf("executor stats while A is held = %+v, want %+v", e.Stats(), want)
				}
				for i, h := range holders {
					close(h.released)
					if o := recv(t, h.out, h.name+"'s outcome"); o.Result != h.name {
						t.Fatalf("%s's outcome = %+v", h.name, o)
					}
					if i < len(holders)-1 {
						if got := startedNow(r); len(got) != 0 {
							t.Fatalf("started with a hold left: %v", got)
						}
					}
				}
				if got := started(); !slices.Equal(got, tt.released) {
					t.Fatalf("started once A was released: %v, want %v", got, tt.released)
				}
				delivered := map[string]bool{}
				for range fakes {
					delivered[recv(t, r.deliveries, "a delivery").name] = true
				}
				for _, name := range fakes {
					if !delivered[name] {
						t.Fatalf("%s was not delivered (got %v)", name, delivered)
					}
				}
				settle(t, e, r)
				e.Close()
			})
		})
	}
}

// A held request keeps its deadline and its cancellation, as a detached
// one does; the hold lasts until its release, whatever ended the request,
// and a queued item cancelled meanwhile never starts.
func TestExecutorHeldDeadlineAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 20 * time.Millisecond
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1, RequestTimeout: timeout})
		a := e.Conn()
		h := newHolder("holder")
		close(h.gate)
		start := time.Now()
		if err := a.Submit(context.Background(), protocol.StringID(h.name), h.run, func(o server.Outcome) { h.out <- o }); err != nil {
			t.Fatal(err)
		}
		<-h.held
		cancelled, queued := r.instant("cancelled"), r.instant("queued")
		mustSubmit(t, a, "cancelled", cancelled)
		mustSubmit(t, a, "queued", queued)
		if o := recv(t, h.out, "the held request's timeout"); o.Err != protocol.ErrTimedOut {
			t.Fatalf("the held request's outcome = %+v, want ErrTimedOut", o)
		}
		if took := time.Since(start); took != timeout {
			t.Fatalf("timed out after %v, want exactly %v", took, timeout)
		}
		a.Cancel(protocol.StringID("cancelled"))
		if got := startedNow(r); len(got) != 0 {
			t.Fatalf("started while held after the timeout: %v", got)
		}
		expectStats(t, "executor", e.Stats(), Stats{Queued: 1, Detached: 1})
		close(h.released)
		if got := startedNow(r); !slices.Equal(got, []string{"queued"}) {
			t.Fatalf("started once released: %v, want [queued]", got)
		}
		expectDeliveries(t, r, "queued")
		settle(t, e, r)
		e.Close()
	})
}

// HoldConn outside a handler, or with a context kept after its handler
// returned, holds nothing: the connection's work goes on starting.
func TestExecutorHoldConnMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		HoldConn(context.Background())() // a release that does nothing
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1})
		c := e.Conn()
		kept := make(chan context.Context, 1)
		keep := func(ctx context.Context) server.Outcome {
			kept <- ctx
			return server.Outcome{Result: "kept"}
		}
		outs := make(chan server.Outcome, 1)
		if err := c.Submit(context.Background(), protocol.StringID("kept"), keep, func(o server.Outcome) { outs <- o }); err != nil {
			t.Fatal(err)
		}
		recv(t, outs, "outcome")
		synctest.Wait()
		release := HoldConn(<-kept)
		mustSubmit(t, c, "after", r.instant("after"))
		expectDeliveries(t, r, "after")
		release()
		settle(t, e, r)
		e.Close()
	})
}

// TestExecutorHoldStress is TestExecutorStress with every third handler
// holding its connection for a moment, and those of its cancelled ones
// (i%7 == 0) until their cancellation: the holds, the slots and the
// detached count still end at zero, and every outcome is delivered once.
func TestExecutorHoldStress(t *testing.T) {
	executorStress(t, func(ctx context.Context, i int) {
		if i%3 != 0 {
			return
		}
		release := HoldConn(ctx)
		if i%7 == 0 {
			<-ctx.Done()
		} else {
			runtime.Gosched()
		}
		release()
	})
}
