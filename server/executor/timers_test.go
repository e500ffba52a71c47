package executor

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/snodod/snodod/protocol"
)

// The executor's timers run on a fake clock (testing/synctest): a
// deadline fires at exactly RequestTimeout, queue time does not count, and
// an idle worker exits after exactly workerIdle.

func TestExecutorTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 20 * time.Millisecond
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1, RequestTimeout: timeout})
		c := e.Conn()
		s := r.blocking("s")
		s.stubborn = true
		start := time.Now()
		mustSubmit(t, c, "s", s)
		d := recv(t, r.deliveries, "the timeout")
		if d.name != "s" || d.out.Err != protocol.ErrTimedOut {
			t.Fatalf("delivery = %+v, want ErrTimedOut for s", d)
		}
		if took := time.Since(start); took != timeout {
			t.Fatalf("timed out after %v, want exactly %v", took, timeout)
		}
		recv(t, s.cancelled, "the timed-out handler's context to end")
		expectStats(t, "executor", e.Stats(), Stats{Running: 1})
		expectStats(t, "conn", c.Stats(), Stats{})
		mustSubmit(t, c, "s", r.instant("s again"))
		s.Release()
		expectDeliveries(t, r, "s again") // the late result of s is discarded
		settle(t, e, r)
		e.Close()
	})
}

func TestExecutorQueueTimeNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		r := newRecorder()
		e := newExec(t, Limits{MaxConcurrency: 1, RequestTimeout: timeout})
		c := e.Conn()
		blocker, q := r.blocking("blocker"), r.blocking("q")
		blocker.stubborn = true
		mustSubmit(t, c, "blocker", blocker)
		mustSubmit(t, c, "q", q)
		if d := recv(t, r.deliveries, "blocker's timeout"); d.out.Err != protocol.ErrTimedOut {
			t.Fatalf("blocker delivery = %+v, want ErrTimedOut", d)
		}
		time.Sleep(timeout) // q has now waited twice its timeout, queued
		blocker.Release()
		recv(t, q.started, "q to start")
		time.Sleep(timeout - time.Nanosecond)
		synctest.Wait()
		if closed(q.cancelled) {
			t.Fatal("q timed out counting its time in the queue")
		}
		q.Release()
		expectDeliveries(t, r, "q")
		idle(t, e)
		e.Close()
	})
}

// A worker whose queue is empty waits workerIdle for new work (Submit
// hands it over) and then exits: an idle executor has no goroutines.
func TestExecutorWorkerIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		e := newExec(t, Limits{})
		c := e.Conn()
		idleWorkers := func() int {
			e.mu.Lock()
			defer e.mu.Unlock()
			return len(e.idle)
		}
		mustSubmit(t, c, "a", r.instant("a"))
		expectDeliveries(t, r, "a")
		synctest.Wait()
		if n := idleWorkers(); n != 1 {
			t.Fatalf("%d idle workers after a job, want 1", n)
		}
		time.Sleep(workerIdle - time.Nanosecond)
		synctest.Wait()
		mustSubmit(t, c, "b", r.instant("b")) // taken by the idle worker
		if n := idleWorkers(); n != 0 {
			t.Fatalf("%d idle workers after a hand-over, want 0", n)
		}
		expectDeliveries(t, r, "b")
		synctest.Wait()
		time.Sleep(workerIdle - time.Nanosecond)
		synctest.Wait()
		if n := idleWorkers(); n != 1 {
			t.Fatalf("%d idle workers just before workerIdle, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the worker exits; the bubble would report it otherwise
		if n := idleWorkers(); n != 0 {
			t.Fatalf("%d idle workers after workerIdle, want 0", n)
		}
	})
}
