package http_test

import (
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/server/executor"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// 2026 POSTs wait in the executor's shared queue places, not in places of
// their own: with its one slot busy and its one shared place taken, the
// next POST is refused at once (200, -32603 "Server execution capacity
// exhausted"), although the executor gives each connection 4 places and
// each POST is an executor connection of its own.
func TestModernPostsShareTheQueue(t *testing.T) {
	exec, err := executor.New(executor.Limits{MaxConcurrency: 1, MaxQueue: 1, ConnQueue: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Close)
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.Executor = exec })

	blocking := openSSE(t, "POST", e.url, modernHeaders("tools/call", "progress"), progressBody(true))
	blocking.must(t)
	blocking.must(t)
	<-e.started
	queued := make(chan reply, 1)
	go func() {
		queued <- e.call(t, "2", "tools/call", "echo", `"name":"echo","arguments":{"text":"waited"}`)
	}()
	if !eventually.Within(eventually.Timeout, func() bool { return exec.Stats().Queued == 1 }) {
		t.Fatalf("the second call never queued: %+v", exec.Stats())
	}

	r := e.call(t, "3", "tools/call", "echo", `"name":"echo","arguments":{"text":"refused"}`)
	if code, msg := r.errorCode(t); r.status != 200 || code != -32603 || msg != "Server execution capacity exhausted" {
		t.Fatalf("third POST: %d %d %q, want 200 -32603 Server execution capacity exhausted: %s", r.status, code, msg, r.body)
	}

	// Closing the blocking call's response cancels it; the queued call
	// then runs and is answered.
	blocking.close()
	<-e.cancelled
	select {
	case r := <-queued:
		if r.status != 200 || !contains(r.body, "waited") {
			t.Fatalf("queued call: %d %s", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued call was never answered")
	}
}
