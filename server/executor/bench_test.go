package executor

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

func trivial(context.Context) server.Outcome { return server.Outcome{Result: struct{}{}} }

// BenchmarkExecutorSubmit measures Submit→done throughput of trivial jobs.
//
//   - serial: one connection, one job in flight (admission, goroutine start,
//     completion and delivery latency);
//   - window: one connection keeping up to MaxConcurrency+MaxQueue jobs in
//     flight, so slots hand queued jobs on without new goroutines;
//   - parallel: b.RunParallel, one connection per goroutine, each with one
//     job in flight, contending on the executor's lock.
func BenchmarkExecutorSubmit(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		e := benchExecutor(b, Limits{})
		c := e.Conn()
		outs := make(chan server.Outcome, 1)
		done := func(o server.Outcome) { outs <- o }
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := c.Submit(context.Background(), protocol.IntID(int64(i)), trivial, done); err != nil {
				b.Fatal(err)
			}
			<-outs
		}
	})
	b.Run("window", func(b *testing.B) {
		l := Limits{MaxConcurrency: 8, MaxQueue: 256}
		e := benchExecutor(b, l)
		c := e.Conn()
		window := l.MaxConcurrency + l.MaxQueue - l.MaxQueue/4 // the reserve is not ours
		tokens := make(chan struct{}, window)
		done := func(server.Outcome) { <-tokens }
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tokens <- struct{}{}
			if err := c.Submit(context.Background(), protocol.IntID(int64(i)), trivial, done); err != nil {
				b.Fatal(err)
			}
		}
		for range window {
			tokens <- struct{}{} // wait for the stragglers
		}
	})
	b.Run("parallel", func(b *testing.B) {
		e := benchExecutor(b, Limits{MaxConcurrency: 1 << 16, MaxQueue: 1 << 16})
		var refused atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c := e.Conn()
			outs := make(chan server.Outcome, 1)
			done := func(o server.Outcome) { outs <- o }
			for i := int64(0); pb.Next(); i++ {
				if err := c.Submit(context.Background(), protocol.IntID(i), trivial, done); err != nil {
					refused.Add(1)
					continue
				}
				<-outs
			}
		})
		if n := refused.Load(); n != 0 {
			b.Fatalf("%d submissions refused", n)
		}
	})
}

func benchExecutor(b *testing.B, l Limits) *Executor {
	b.Helper()
	e, err := New(l)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	return e
}
