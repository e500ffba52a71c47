package stdio_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// Case 26: a duplicate in-flight id is refused at once; the original is not
// disturbed.
func TestDuplicateInFlightID(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.send(call(7, "block", `{}`))
		<-h.cat.started
		h.send(req(7, "tools/list", `{}`))
		h.expect(errLine("7", -32600, "Duplicate in-flight request id"))
		h.cat.Release()
		if l := h.line(); string(parse(t, l).ID) != "7" || resultText(t, l) != "released" {
			t.Fatalf("got %s", l)
		}
		h.finish()
	})
}

// Case 27: ids compare by JSON value; a finished id is free at once; an open
// listen stream's id is in flight.
func TestIDsCompareByValue(t *testing.T) {
	h := start(t, pipes)
	h.send(call(1, "block", `{}`))
	<-h.cat.started
	h.send(req("1", "tools/list", `{}`))
	if id := string(parse(t, h.line()).ID); id != `"1"` {
		t.Fatalf("id %s", id)
	}
	h.send(req(5, "tools/list", `{}`))
	h.line()
	h.send(req(5, "tools/list", `{}`))
	if f := parse(t, h.line()); string(f.ID) != "5" || f.Result == nil {
		t.Fatal("id 5 not reusable")
	}
	h.send(req("s", "subscriptions/listen", `{"notifications":{"toolsListChanged":true}}`))
	if f := parse(t, h.line()); f.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("no acknowledgement: %+v", f)
	}
	h.send(req("s", "tools/list", `{}`))
	h.expect(errLine(`"s"`, -32600, "Duplicate in-flight request id"))
	h.cat.Release()
	h.line()
	h.finish()
}

// Case 28: completion order, not arrival order.
func TestFastOvertakesSlow(t *testing.T) {
	h := start(t, pipes)
	h.send(call("slow", "echo", `{"text":"slow","delayMs":200}`), call("fast", "echo", `{"text":"fast"}`))
	if got := resultText(t, h.line()); got != "fast" {
		t.Fatalf("first %s", got)
	}
	if got := resultText(t, h.line()); got != "slow" {
		t.Fatalf("second %s", got)
	}
	h.finish()
}

// Case 29: 100 concurrent responses arrive as 100 whole lines.
func TestHundredConcurrentResponses(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		for i := 1; i <= 100; i++ {
			h.send(call(i, "echo", fmt.Sprintf(`{"text":"%d","delayMs":%d}`, i, i%7)))
		}
		seen := map[string]bool{}
		for range 100 {
			l := h.line()
			f := parse(t, l)
			if seen[string(f.ID)] || resultText(t, l) != string(f.ID) {
				t.Fatalf("bad or repeated line %s", l)
			}
			seen[string(f.ID)] = true
		}
		h.finish()
	})
}

// Case 30: at capacity the refusal is immediate.
func TestCapacityExhausted(t *testing.T) {
	h := start(t, pipes, withExecutor(1, 1))
	h.send(call("a", "block", `{}`))
	<-h.cat.started
	h.send(call("b", "echo", `{"text":"b"}`), call("c", "echo", `{"text":"c"}`))
	h.expect(`{"jsonrpc":"2.0","id":"c","error":{"code":-32603,"message":"Server execution capacity exhausted"}}`)
	h.cat.Release()
	for _, want := range []string{`"a"`, `"b"`} {
		if f := parse(t, h.line()); string(f.ID) != want || f.Result == nil {
			t.Fatalf("want result for %s", want)
		}
	}
	h.finish()
}

// Case 31: queued work starts in admission order.
func TestQueueOrder(t *testing.T) {
	h := start(t, pipes, withExecutor(1, 2))
	h.send(call("a", "block", `{}`))
	<-h.cat.started
	h.send(call("b", "echo", `{"text":"b"}`), call("c", "echo", `{"text":"c"}`))
	eventually.True(t, "two queued calls", func() bool { return h.exec.Stats().Queued == 2 })
	h.noOutput(50 * time.Millisecond)
	h.cat.Release()
	for _, want := range []string{`"a"`, `"b"`, `"c"`} {
		if id := string(parse(t, h.line()).ID); id != want {
			t.Fatalf("got %s, want %s", id, want)
		}
	}
	h.finish()
}

// Cases 32 and 33: the deadline answers once, even for a handler that
// ignores its context; the late result is never written.
func TestRequestTimeout(t *testing.T) {
	for _, line := range []string{
		call("t", "echo", `{"text":"x","delayMs":200}`),
		call("t", "stubborn", `{"ms":100}`),
	} {
		h := start(t, pipes, withRequestTimeout(20*time.Millisecond))
		h.send(line)
		h.expect(errLine(`"t"`, -32603, "Request execution timed out"))
		h.noOutput(300 * time.Millisecond)
		h.finish()
	}
}

// Case 34: panics become errors for that request only.
func TestHandlerPanics(t *testing.T) {
	h := start(t, pipes)
	h.send(call(1, "raising", `{}`))
	h.expect(errLine("1", -32603, "Tool raised an exception"))
	h.send(req(2, "resources/read", `{"uri":"test://panic"}`))
	h.expect(`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Request worker failed"}}`)
	h.send(req(3, "tools/list", `{}`))
	if id := string(parse(t, h.line()).ID); id != "3" {
		t.Fatalf("id %s", id)
	}
	h.finish()
}

// A result that cannot be encoded is replaced, with the request's id.
func TestUnencodableResult(t *testing.T) {
	h := start(t, pipes)
	h.send(call(1, "unencodable", `{}`))
	h.expect(errLine("1", -32603, "Server produced an invalid result"))
	h.finish()
}

// Requests arriving while the executor is closed are refused.
func TestExecutorClosed(t *testing.T) {
	h := start(t, pipes)
	h.exec.Close()
	h.send(call(1, "echo", `{"text":"x"}`))
	h.expect(errLine("1", -32603, "Request executor unavailable"))
	h.finish()
}
