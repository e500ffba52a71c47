package stdio_test

import (
	"context"
	"testing"
	"time"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/transport/stdio"
)

// A context cancelled with ErrKilled ends the connection without the grace
// period: a handler that would block for the whole grace (an hour here) is
// cancelled and answered at once, and Serve returns nil.
func TestKilled(t *testing.T) {
	ep := pipes(t)
	cat := newTestCatalog()
	var counters stdio.Counters
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: cat, Counters: &counters,
		Limits: limits.Limits{ShutdownGrace: time.Hour}}
	ctx, cancel := context.WithCancelCause(context.Background())
	served := make(chan error, 1)
	go func() { served <- tr.Serve(ctx) }()
	r := newLineSource(ep.r)
	ep.w.Write([]byte(call("b", "block", `{}`) + "\n"))
	<-cat.started
	cancel(stdio.ErrKilled)
	if l := r.next(t); l != errLine(`"b"`, -32603, "Session closed by server") {
		t.Fatalf("got %s", l)
	}
	<-cat.ctxEnded
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if n := counters.Requests(); n != 1 {
		t.Errorf("Requests() = %d, want 1", n)
	}
	ep.closeAll()
	goleakCheck(t)
}
