package stdio_test

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

func listen(id string) string {
	return req(id, "subscriptions/listen", `{"notifications":{"toolsListChanged":true}}`)
}

const ackPrefix = `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":`

// Case 69: acknowledgement, events, cancellation with a reason, id reuse.
func TestListenLifecycle(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.send(listen("stdio-sub"))
		if l := h.line(); !strings.HasPrefix(l, ackPrefix) {
			t.Fatalf("got %s", l)
		}
		src := <-h.cat.sources
		src.events <- server.Event{Method: "notifications/tools/list_changed", Params: map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": "stdio-sub"}}}
		h.expect(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"stdio-sub"}}}`)
		h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"stdio-sub","reason":"client done"}}`)
		if got := <-src.closed; got != (closeInfo{server.Cancelled, "client done"}) {
			t.Fatalf("closed with %+v", got)
		}
		h.send(req("stdio-sub", "tools/list", `{}`))
		if f := parse(t, h.line()); string(f.ID) != `"stdio-sub"` || f.Result == nil {
			t.Fatalf("got %+v", f)
		}
		h.finish()
	})
}

// Case 70: a source's graceful end and its failure.
func TestListenSourceEnds(t *testing.T) {
	h := start(t, pipes)
	h.send(listen("sub"))
	h.line()
	src := <-h.cat.sources
	src.events <- server.Event{Done: true, Final: map[string]any{"resultType": "complete"}}
	h.expect(`{"jsonrpc":"2.0","id":"sub","result":{"resultType":"complete"}}`)
	if got := <-src.closed; got.reason != server.Completed {
		t.Fatalf("closed with %+v", got)
	}
	h.send(listen("sub"))
	h.line()
	src = <-h.cat.sources
	src.fail <- errSourceFailed
	h.expect(errLine(`"sub"`, -32603, "Subscription source failed"))
	if got := <-src.closed; got.reason != server.Completed {
		t.Fatalf("closed with %+v", got)
	}
	h.finish()
}

// Case 71: the per-connection cap.
func TestListenCap(t *testing.T) {
	h := start(t, pipes, with(func(tr *stdio.Transport) { tr.Limits.MaxSubscriptions = 1 }))
	h.send(listen("a"))
	h.line()
	h.send(listen("b"))
	h.expect(errLine(`"b"`, -32603, "Server subscription capacity exhausted"))
	<-h.cat.sources
	if got := <-(<-h.cat.sources).closed; got.reason != server.Refused {
		t.Fatalf("closed with %+v", got)
	}
	h.finish()
}

// Case 72: the next event is asked for only after the previous was written.
func TestListenBackPressure(t *testing.T) {
	s := startStalled(t, pipes, stdio.Transport{}, executor.Limits{})
	io.WriteString(s.ep.w, listen("s")+"\n")
	src := <-s.cat.sources
	for range 3 {
		src.events <- server.Event{Method: "notifications/tools/list_changed"}
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(src.asked); n != 0 {
		t.Fatalf("asked for %d events before the acknowledgement was written", n)
	}
	br := skipFiller(t, s.ep.r, s.filler)
	for i := range 4 {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !strings.HasPrefix(l, ackPrefix) {
			t.Fatalf("first line %s", l)
		}
	}
	eventually.True(t, "four events asked for", func() bool { return len(src.asked) == 4 })
	s.ep.closeInput()
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	if got := <-src.closed; got.reason != server.Disconnected {
		t.Fatalf("closed with %+v", got)
	}
}

// Case 55: a blocked acknowledgement closes the source as an output
// failure; a blocked write with a stream open closes it as disconnected.
func TestListenOutputFailure(t *testing.T) {
	s := startStalled(t, pipes, stdio.Transport{Limits: limits.Limits{WriteTimeout: 30 * time.Millisecond}}, executor.Limits{})
	io.WriteString(s.ep.w, listen("s")+"\n")
	if err := s.wait(); !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Serve returned %v", err)
	}
	if got := <-(<-s.cat.sources).closed; got.reason != server.OutputFailed {
		t.Fatalf("closed with %+v", got)
	}

	ep := pipes(t)
	defer ep.closeAll()
	cat := newTestCatalog()
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: cat, Limits: limits.Limits{WriteTimeout: 30 * time.Millisecond}}
	served := make(chan error, 1)
	go func() { served <- tr.Serve(t.Context()) }()
	io.WriteString(ep.w, listen("s")+"\n")
	if l, _ := bufio.NewReader(ep.r).ReadString('\n'); !strings.HasPrefix(l, ackPrefix) {
		t.Fatalf("got %s", l)
	}
	src := <-cat.sources
	fill(t, ep.out.(deadlineWriter))
	io.WriteString(ep.w, "{invalid}\n")
	if err := <-served; !errors.Is(err, stdio.ErrWriteTimeout) {
		t.Fatalf("Serve returned %v", err)
	}
	if got := <-src.closed; got.reason != server.Disconnected {
		t.Fatalf("closed with %+v", got)
	}
}

// Case 59: EOF closes listen streams silently.
func TestListenClosedAtEOF(t *testing.T) {
	h := start(t, pipes)
	h.send(listen("s"))
	h.line()
	src := <-h.cat.sources
	h.finish()
	if got := <-src.closed; got.reason != server.Disconnected {
		t.Fatalf("closed with %+v", got)
	}
}
