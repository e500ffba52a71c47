package stdio_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// Case 35: kill one, keep serving; an invalid cancellation changes nothing;
// a cancelled id is free at once.
func TestCancelKillsOneKeepsServing(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.send(call("cancel-me", "block", `{}`))
		<-h.cat.started
		h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"cancel-me","reason":{"not":"a string"}}}`)
		h.send(call("barrier", "block", `{}`))
		<-h.cat.started
		h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"cancel-me","reason":"test"}}`)
		if got := <-h.cat.ctxEnded; got != `"cancel-me"` {
			t.Fatalf("context ended for %s", got)
		}
		// "barrier" is still blocked: the invalid cancellation had no effect
		// on it, and the valid one freed "cancel-me" for reuse.
		h.send(call("cancel-me", "echo", `{"text":"id reused"}`))
		if l := h.line(); string(parse(t, l).ID) != `"cancel-me"` || resultText(t, l) != "id reused" {
			t.Fatalf("got %s", l)
		}
		h.cat.Release()
		if id := string(parse(t, h.line()).ID); id != `"barrier"` {
			t.Fatalf("got %s", id)
		}
		h.send(call("survives", "echo", `{"text":"s"}`))
		if id := string(parse(t, h.line()).ID); id != `"survives"` {
			t.Fatalf("got %s", id)
		}
		h.finish()
	})
}

// Case 36: nothing is ever written for a cancelled request, even when its
// handler returns a result afterwards.
func TestCancelledNeverAnswered(t *testing.T) {
	h := start(t, pipes)
	h.send(call(9, "block", `{}`))
	<-h.cat.started
	h.send(cancelReq("9"))
	<-h.cat.ctxEnded
	h.cat.Release()
	h.send(req(10, "tools/list", `{}`))
	if id := string(parse(t, h.line()).ID); id != "10" {
		t.Fatalf("got %s", id)
	}
	h.finish()
}

// Case 37: after cancellation, no progress and no result.
func TestCancelStopsProgress(t *testing.T) {
	h := start(t, pipes)
	h.send(callWithToken(1, "progress", `{"finish":"block"}`, `"token"`))
	h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"token","progress":0,"total":1,"message":"starting"}}`)
	// The second report is outstanding until read; cancel while it may be.
	h.send(cancelReq("1"))
	<-h.cat.ctxEnded
	h.closeInput()
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	for l := range drain(h) {
		if !strings.Contains(l, `"progress":0.5`) {
			t.Fatalf("unexpected line after cancel: %s", l)
		}
	}
}

// drain closes the devices and returns what is left of the output.
func drain(h *harness) <-chan string {
	h.ep.closeAll()
	return h.out
}

// Case 38: a cancelled queued request never runs.
func TestCancelQueued(t *testing.T) {
	h := start(t, pipes, withExecutor(1, 10))
	h.send(call("a", "block", `{}`))
	<-h.cat.started
	// Each step is seen by the executor before the next, so "b" is surely
	// queued when cancelled and "a" still holds the only slot.
	queued := func(n int) func() bool { return func() bool { return h.exec.Stats().Queued == n } }
	h.send(call("b", "block", `{}`))
	eventually.True(t, "b queued", queued(1))
	h.send(cancelReq(`"b"`))
	eventually.True(t, "b cancelled in the queue", queued(0))
	h.send(req("sync", "ping", `{}`))
	eventually.True(t, "sync queued", queued(1))
	h.cat.Release()
	for _, want := range []string{`"a"`, `"sync"`} {
		if id := string(parse(t, h.line()).ID); id != want {
			t.Fatalf("got %s, want %s", id, want)
		}
	}
	select {
	case id := <-h.cat.started:
		t.Fatalf("cancelled queued request ran: %s", id)
	default:
	}
	h.finish()
}

// Case 39: cancellations that are not valid, or name nothing, have no effect.
func TestCancelNoEffect(t *testing.T) {
	h := start(t, pipes)
	h.send(call(1, "block", `{}`))
	<-h.cat.started
	h.send(cancelReq("12345"),
		`{"jsonrpc":"2.0","method":"notifications/cancelled"}`,
		cancelReq(`"`+strings.Repeat("c", 300)+`"`),
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":5}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.0}}`,
	)
	h.noOutput(300 * time.Millisecond)
	h.cat.Release()
	if l := h.line(); resultText(t, l) != "released" {
		t.Fatalf("got %s", l)
	}
	h.finish()
}

// Case 40: cancellation works the same after a legacy initialize.
func TestCancelLegacy(t *testing.T) {
	h := start(t, pipes)
	h.send(initReq("2025-06-18"))
	h.line()
	h.send(lreq("cancel-me", "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}}))
	<-h.cat.started
	h.send(cancelReq(`"cancel-me"`))
	<-h.cat.ctxEnded
	h.cat.Release()
	h.noOutput(100 * time.Millisecond)
	h.finish()
}
