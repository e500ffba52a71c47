package http_test

import (
	"context"
	"strings"
	"testing"
	"time"

	mcphttp "github.com/snodod/snodod/transport/http"
)

// An idle stream gets ": keep-alive" comments, and no data.
func TestKeepAlive(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.KeepAlive = 20 * time.Millisecond })
	listen := modernBody(`"k"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)
	s := openSSE(t, "POST", e.url, modernHeaders("subscriptions/listen", ""), listen)
	s.must(t) // the acknowledgement
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.others)
		var first string
		if n > 0 {
			first = s.others[0]
		}
		s.mu.Unlock()
		if n >= 3 {
			if first != ": keep-alive\n" {
				t.Fatalf("comment %q", first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keep-alive comments", n)
		}
		time.Sleep(10 * time.Millisecond)
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
