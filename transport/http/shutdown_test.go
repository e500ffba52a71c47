package http_test

import (
	"context"
	"fmt"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// An idle stream gets ": keep-alive" comments, and no data.
func TestKeepAlive(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.KeepAlive = 20 * time.Millisecond })
	listen := modernBody(`"k"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)
	s := openSSE(t, "POST", e.url, modernHeaders("subscriptions/listen", ""), listen)
	s.must(t) // the acknowledgement
	var n int
	var first string
	if !eventually.Within(eventually.Timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if n = len(s.others); n > 0 {
			first = s.others[0]
		}
		return n >= 3
	}) {
		t.Fatalf("%d keep-alive comments", n)
	}
	if first != ": keep-alive\n" {
		t.Fatalf("comment %q", first)
	}
	if l, err := s.next(0); err == nil {
		t.Fatalf("an idle stream wrote data: %s", l)
	}
}

// Shutdown: a listen stream ends with notifications/cancelled at once; a
// running request may finish within the grace, then is cancelled and
// answered "Session closed by server"; new requests get 503.
func TestShutdown(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.ShutdownGrace = 200 * time.Millisecond })
	listen := openSSE(t, "POST", e.url, modernHeaders("subscriptions/listen", ""),
		modernBody(`"s1"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`))
	listen.must(t)
	done := make(chan reply, 1)
	go func() { done <- e.call(t, `"b"`, "tools/call", "block", `"name":"block"`) }()
	<-e.started
	stopped := make(chan error, 1)
	go func() { stopped <- e.handler.Shutdown(context.Background()) }()
	if l := listen.must(t); l != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1","reason":"Subscription closed by server"}}` {
		t.Fatalf("listen on shutdown: %s", l)
	}
	if _, err := listen.next(5 * time.Second); err != errEnded {
		t.Fatalf("the listen stream did not end: %v", err)
	}
	if r := e.call(t, "2", "server/discover", "", ""); r.status != 503 || !strings.Contains(r.body, "Session closed by server") {
		t.Fatalf("a request during the drain: %d %s", r.status, r.body)
	}
	r := <-done
	if r.status != 200 || r.body != `{"jsonrpc":"2.0","id":"b","error":{"code":-32603,"message":"Session closed by server"}}`+"\n" {
		t.Fatalf("the running request: %d %q", r.status, r.body)
	}
	<-e.cancelled
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// Retire (an upgrade): a kept-alive connection gets its next answer, a
// real one, with Connection: close and is then closed by the server,
// never while idle; a listen stream ends as in Shutdown; a running
// request finishes; Connections counts down to 0.
func TestRetire(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.ShutdownGrace = 5 * time.Second })
	listen := openSSE(t, "POST", e.url, modernHeaders("subscriptions/listen", ""),
		modernBody(`"s1"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`))
	listen.must(t)
	kept := e.dial(t)
	ask := func() (*nethttp.Response, string) {
		fmt.Fprintf(kept, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\nContent-Length: %d\r\n\r\n%s", len(discover), discover)
		return readResponse(t, kept)
	}
	if resp, _ := ask(); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before Retire: %d, close %v", resp.StatusCode, resp.Close)
	}
	if n := e.handler.Stats().Connections; n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	e.handler.Retire()
	if l := listen.must(t); l != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1","reason":"Subscription closed by server"}}` {
		t.Fatalf("listen on Retire: %s", l)
	}
	// The kept connection is still open, idle: nothing is closed under
	// a client that may be sending.
	time.Sleep(50 * time.Millisecond)
	resp, body := ask()
	if resp.StatusCode != 200 || !resp.Close || !contains(body, `"supportedVersions"`) {
		t.Fatalf("the next request after Retire: %d, close %v, %s", resp.StatusCode, resp.Close, body)
	}
	_ = kept.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := kept.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("the connection stayed open after Connection: close: %d %v", n, err)
	}
	// The listen stream's connection is idle in the client's pool: the
	// client closes it (a server closes such a one only at the end of
	// the grace, Shutdown).
	listen.close()
	nethttp.DefaultTransport.(*nethttp.Transport).CloseIdleConnections()
	if !eventually.Within(eventually.Timeout, func() bool { return e.handler.Stats().Connections == 0 }) {
		t.Fatalf("%d connections left", e.handler.Stats().Connections)
	}
	// A new connection is still served, once (the listener is the
	// caller's to close).
	kept = e.dial(t)
	if resp, _ := ask(); resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("a new connection after Retire: %d, close %v", resp.StatusCode, resp.Close)
	}
}
