package executor

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// TestExtendDeadline runs on a fake clock: a handler that extends its
// deadline outlives the executor's RequestTimeout.
func TestExtendDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := New(Limits{RequestTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		conn := e.Conn()
		outcomes := make(chan server.Outcome, 2)
		run := func(extend bool) func(context.Context) server.Outcome {
			return func(ctx context.Context) server.Outcome {
				if extend && !ExtendDeadline(ctx, time.Minute) {
					return server.Outcome{Err: protocol.ErrInvalidResult}
				}
				select {
				case <-time.After(10 * time.Second):
					return server.Outcome{Result: struct{}{}}
				case <-ctx.Done():
					return server.Outcome{}
				}
			}
		}
		done := func(o server.Outcome) { outcomes <- o }
		if err := conn.Submit(context.Background(), protocol.IntID(1), run(true), done); err != nil {
			t.Fatal(err)
		}
		if err := conn.Submit(context.Background(), protocol.IntID(2), run(false), done); err != nil {
			t.Fatal(err)
		}
		if o := <-outcomes; o.Err != protocol.ErrTimedOut {
			t.Errorf("first outcome %+v, want the unextended request timed out", o)
		}
		if o := <-outcomes; o.Err != nil {
			t.Errorf("extended request: %+v, want its result", o.Err)
		}
		if ExtendDeadline(context.Background(), time.Second) {
			t.Error("ExtendDeadline outside a handler reported true")
		}
		time.Sleep(time.Second) // idle workers leave
		synctest.Wait()
	})
}
