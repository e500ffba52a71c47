package http_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// Bad input (docs/protocol.md §13.2): each is refused with its documented
// status, and a healthy client's calls are answered meanwhile.

// healthy checks that a well-formed call is answered.
func (e *env) healthy(t *testing.T) {
	t.Helper()
	if r := e.call(t, "1", "tools/call", "echo", `"name":"echo","arguments":{"text":"ok"}`); r.status != 200 || !contains(r.body, `"text":"ok"`) {
		t.Fatalf("the healthy client's call: %d %s", r.status, r.body)
	}
}

func (e *env) dial(t *testing.T) net.Conn {
	t.Helper()
	u, _ := url.Parse(e.url)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A body trickled one byte at a time is cut off by the read timeout: 408
// with a JSON-RPC error, and the connection closed.
func TestTrickledBody(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.ReadTimeout = 300 * time.Millisecond })
	c := e.dial(t)
	body := discover
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\nContent-Length: %d\r\n\r\n", len(body))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	e.healthy(t) // while the body trickles
	resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !strings.Contains(string(b), `"message":"Request body not received within the 300ms read timeout"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	e.healthy(t)
}

// 10,000 headers exceed the header limit: 431.
func TestTenThousandHeaders(t *testing.T) {
	e := newEnv(t, nil)
	h := modernHeaders("server/discover", "")
	for i := range 10_000 {
		h.Set(fmt.Sprintf("X-Filler-%d", i), "v")
	}
	if r := post(t, e.url, h, discover); r.status != nethttp.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d", r.status)
	}
	e.healthy(t)
}

// Connections that never finish their headers are closed after the header
// timeout, and do not hold up others.
func TestHalfOpenConnections(t *testing.T) {
	e := newEnv(t, func(_ *mcphttp.Options, l *mcphttp.ServerLimits) { l.ReadHeaderTimeout = 300 * time.Millisecond })
	var conns []net.Conn
	for range 200 {
		c := e.dial(t)
		if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	e.healthy(t)
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("connection %d was not closed by the server: %v", i, err)
		}
	}
	e.healthy(t)
}

// A client opening 1,000 listen streams gets the listener's cap: the
// streams over it are refused with -32603 "Server subscription capacity
// exhausted" (200, JSON), and the healthy client is served throughout.
func TestThousandListenStreams(t *testing.T) {
	e := newEnv(t, nil)
	listen := modernBody(`"s"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)
	var open []*sse
	refused := 0
	for i := range 1000 {
		s := openSSE(t, "POST", e.url, modernHeaders("subscriptions/listen", ""), listen)
		if s.resp.StatusCode != 200 {
			t.Fatalf("stream %d: status %d", i, s.resp.StatusCode)
		}
		if s.resp.Header.Get("Content-Type") == "application/json" {
			l := readAllSSE(s)
			if !strings.Contains(l, `"code":-32603,"message":"Server subscription capacity exhausted"`) {
				t.Fatalf("stream %d: %s", i, l)
			}
			refused++
			s.close()
			continue
		}
		if l := s.must(t); !strings.Contains(l, "acknowledged") {
			t.Fatalf("stream %d: %s", i, l)
		}
		open = append(open, s)
		if i%100 == 0 {
			e.healthy(t)
		}
	}
	if len(open) != mcphttp.DefaultMaxSubscriptions || refused != 1000-mcphttp.DefaultMaxSubscriptions {
		t.Fatalf("%d open, %d refused", len(open), refused)
	}
	if st := e.handler.Stats(); st.Listens != mcphttp.DefaultMaxSubscriptions {
		t.Fatalf("stats: %+v", st)
	}
	e.healthy(t)
	for _, s := range open {
		s.close()
	}
	// Closed streams free their slots.
	if !eventually.Within(eventually.Timeout, func() bool { return e.handler.Stats().Listens == 0 }) {
		t.Fatalf("slots still held: %+v", e.handler.Stats())
	}
}

// readAllSSE reads a JSON body through the sse reader (its data-less
// lines are the body).
func readAllSSE(s *sse) string {
	for range s.lines {
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.others, "")
}

// The cap on legacy sessions: an initialize beyond it gets 503.
func TestMaxSessions(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.MaxSessions = 2 })
	a := e.initSession(t, "2025-11-25")
	e.initSession(t, "2025-06-18")
	r := post(t, e.url, legacyHeaders("", ""), initBody("2025-11-25"))
	if code, msg := r.errorCode(t); r.status != 503 || code != -32603 || msg != "Server session capacity exhausted (http.max_sessions = 2)" {
		t.Fatalf("third session: %d %s", r.status, r.body)
	}
	if r := do(t, "DELETE", e.url, hdr("Mcp-Session-Id", a), ""); r.status != 204 {
		t.Fatalf("DELETE: %d", r.status)
	}
	e.initSession(t, "2025-11-25")
	e.healthy(t)
}

// An idle session ends after the idle timeout; one with an open stream
// does not.
func TestSessionIdleTimeout(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.SessionIdleTimeout = 200 * time.Millisecond })
	idle := e.initSession(t, "2025-11-25")
	kept := e.initSession(t, "2025-11-25")
	s := openSSE(t, "GET", e.url, legacyHeaders(kept, ""), "")
	if s.resp.StatusCode != 200 {
		t.Fatalf("GET: %d", s.resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := post(t, e.url, legacyHeaders(idle, ""), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if r.status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session did not end")
		}
		time.Sleep(300 * time.Millisecond) // longer than the timeout: the POST above restarted it
	}
	if r := post(t, e.url, legacyHeaders(kept, ""), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.status != 200 {
		t.Fatalf("the session with a stream ended: %d %s", r.status, r.body)
	}
}
