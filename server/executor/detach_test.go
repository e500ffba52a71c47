package executor

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Detach (docs/transport.md §13.5): a handler waiting on something outside the
// process gives its slot back while it stays in flight. These tests run on
// synctest's clock, so "answered at once" means before any time passes.

// detaching runs f after giving its slot back.
func detaching(f *fake) func(context.Context) server.Outcome {
	return func(ctx context.Context) server.Outcome {
		if !Detach(ctx) {
			panic("Detach refused a running handler")
		}
		return f.run(ctx)
	}
}

func submitDetaching(t *testing.T, c *Conn, id string, f *fake) {
	t.Helper()
	if err := c.Submit(context.Background(), protocol.StringID(id), detaching(f), f.done); err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
}

// The boundary of the brief: every slot's worth of detached handlers and
// one more, and a fast request is still answered before any of them ends.
func TestExecutorDetachedDoNotHoldSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		e := newExec(t, Limits{})
		c := e.Conn()
		n := e.Limits().MaxConcurrency + 1
		slow := make([]*fake, n)
		for i := range slow {
			slow[i] = r.blocking(fmt.Sprintf("slow %d", i))
			submitDetaching(t, c, slow[i].name, slow[i])
		}
		synctest.Wait()
		expectStats(t, "executor", e.Stats(), Stats{Detached: n})
		expectStats(t, "conn", c.Stats(), Stats{Running: n})
		start := time.Now()
		mustSubmit(t, c, "fast", r.instant("fast"))
		expectDeliveries(t, r, "fast")
		if took := time.Since(start); took != 0 {
			t.Fatalf("the fast request took %v behind %d detached ones", took, n)
		}
		for _, f := range slow {
			f.Release()
			expectDeliveries(t, r, f.name)
		}
		settle(t, e, r)
		e.Close()
	})
}

// A handler detaching hands its slot to the queue's next item at once, in
// the queue's order.
func TestExecutorDetachStartsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1})
		c := e.Conn()
		first := r.blocking("first")
		detach := make(chan struct{})
		run := func(ctx context.Context) server.Outcome {
			<-detach
			Detach(ctx)
			return first.run(ctx)
		}
		if err := c.Submit(context.Background(), protocol.StringID("first"), run, first.done); err != nil {
			t.Fatal(err)
		}
		second, third := r.blocking("second"), r.blocking("third")
		mustSubmit(t, c, "second", second)
		mustSubmit(t, c, "third", third)
		synctest.Wait()
		expectStats(t, "executor", e.Stats(), Stats{Running: 1, Queued: 2})
		close(detach)
		if got := nextStarts(t, r, 2); got[0] != "first" || got[1] != "second" {
			t.Fatalf("starts = %v, want first then second", got)
		}
		synctest.Wait()
		expectStats(t, "executor", e.Stats(), Stats{Running: 1, Queued: 1, Detached: 1})
		first.Release() // a detached handler returning frees no slot
		expectDeliveries(t, r, "first")
		synctest.Wait()
		expectStats(t, "executor", e.Stats(), Stats{Running: 1, Queued: 1})
		second.Release()
		expectDeliveries(t, r, "second")
		recv(t, third.started, "third to start")
		third.Release()
		expectDeliveries(t, r, "third")
		settle(t, e, r)
		e.Close()
	})
}

// A detached request keeps its deadline, ExtendDeadline included, and its
// cancellation.
func TestExecutorDetachedDeadlineAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 20 * time.Millisecond
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1, RequestTimeout: timeout})
		c := e.Conn()

		late := r.blocking("late")
		late.stubborn = true
		start := time.Now()
		submitDetaching(t, c, "late", late)
		if d := recv(t, r.deliveries, "the timeout"); d.name != "late" || d.out.Err != protocol.ErrTimedOut {
			t.Fatalf("delivery = %+v, want ErrTimedOut for late", d)
		}
		if took := time.Since(start); took != timeout {
			t.Fatalf("timed out after %v, want exactly %v", took, timeout)
		}
		recv(t, late.cancelled, "the timed-out handler's context to end")
		late.Release()
		synctest.Wait()

		extended := r.blocking("extended")
		run := func(ctx context.Context) server.Outcome {
			Detach(ctx)
			if !ExtendDeadline(ctx, 3*timeout) {
				panic("ExtendDeadline refused a detached handler")
			}
			return extended.run(ctx)
		}
		start = time.Now()
		if err := c.Submit(context.Background(), protocol.StringID("extended"), run, extended.done); err != nil {
			t.Fatal(err)
		}
		if d := recv(t, r.deliveries, "the extended timeout"); d.out.Err != protocol.ErrTimedOut {
			t.Fatalf("delivery = %+v, want ErrTimedOut", d)
		}
		if took := time.Since(start); took != 3*timeout {
			t.Fatalf("timed out after %v, want exactly %v", took, 3*timeout)
		}

		cancelled := r.blocking("cancelled")
		submitDetaching(t, c, "cancelled", cancelled)
		recv(t, cancelled.started, "start")
		c.Cancel(protocol.StringID("cancelled"))
		recv(t, cancelled.cancelled, "the cancelled handler's context to end")
		settle(t, e, r) // nothing is delivered for the cancelled request
		e.Close()
	})
}

// Detach outside a handler, twice, or with a context kept after its
// handler returned gives nothing back: the slots stay counted right.
func TestExecutorDetachMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if Detach(context.Background()) {
			t.Fatal("Detach outside a handler reported true")
		}
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1})
		c := e.Conn()
		kept := make(chan context.Context, 1)
		twice := func(ctx context.Context) server.Outcome {
			first, second := Detach(ctx), Detach(ctx)
			kept <- ctx
			return server.Outcome{Result: fmt.Sprint(first, second)}
		}
		outs := make(chan server.Outcome, 1)
		if err := c.Submit(context.Background(), protocol.StringID("twice"), twice, func(o server.Outcome) { outs <- o }); err != nil {
			t.Fatal(err)
		}
		if o := recv(t, outs, "outcome"); o.Result != "true false" {
			t.Fatalf("Detach, Detach = %v, want true false", o.Result)
		}
		synctest.Wait()
		if Detach(<-kept) {
			t.Fatal("Detach after the handler returned reported true")
		}
		expectStats(t, "executor", e.Stats(), Stats{})
		blocker, queued := r.blocking("blocker"), r.blocking("queued")
		mustSubmit(t, c, "blocker", blocker)
		mustSubmit(t, c, "queued", queued)
		synctest.Wait()
		expectStats(t, "executor", e.Stats(), Stats{Running: 1, Queued: 1})
		blocker.Release()
		queued.Release()
		expectDeliveries(t, r, "blocker", "queued")
		settle(t, e, r)
		e.Close()
	})
}

// TestExecutorDetachStress is TestExecutorStress with every other handler
// detaching: the slots and the detached count still end at zero.
func TestExecutorDetachStress(t *testing.T) {
	executorStress(t, func(ctx context.Context, i int) {
		if i%2 == 0 {
			Detach(ctx)
		}
	})
}
