package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeremote"
	"github.com/snodod/snodod/protocol"
)

// A call cancelled by its caller is cancelled at the server: in 2025 by
// notifications/cancelled, in 2026 by closing the POST's stream; the Conn
// serves the next call.
func TestHTTPCancel(t *testing.T) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless, fakeremote.ModeSSE} {
		t.Run(mode, func(t *testing.T) {
			fr, ts := remoteServer(t, mode)
			c := dialRemote(t, HTTP{URL: ts.URL, SSE: mode == fakeremote.ModeSSE}, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := c.Call(ctx, "tools/call", toolParams(t, "slow", map[string]any{"delay_ms": 60000}, nil), CallOptions{})
				done <- err
			}()
			eventually.True(t, "the call to reach the server", func() bool { return fr.Calls.Load() == 1 })
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("the cancelled call: %v", err)
			}
			eventually.True(t, "the server to see the cancellation", func() bool { return fr.Cancelled.Load() == 1 })
			if got := toolText(t, c, "echo", map[string]any{"text": "next"}, CallOptions{}); got != "remote: next" {
				t.Errorf("after the cancellation: %q", got)
			}
		})
	}
}

// A session the server expired is replaced once, transparently for the
// requests that follow; the Conn goes on; closing it deletes the session.
func TestHTTPSessionExpired(t *testing.T) {
	fr, ts := remoteServer(t, fakeremote.ModeStreamable)
	c := dialRemote(t, HTTP{URL: ts.URL}, Options{})
	if got := toolText(t, c, "echo", map[string]any{"text": "one"}, CallOptions{}); got != "remote: one" {
		t.Fatalf("echo: %q", got)
	}
	fr.ExpireSessions()
	for i := range 3 {
		if got := toolText(t, c, "echo", map[string]any{"text": "again"}, CallOptions{}); got != "remote: again" {
			t.Fatalf("echo %d after the expiry: %q", i, got)
		}
	}
	select {
	case <-c.Done():
		t.Fatalf("the Conn ended: %v", c.Err())
	default:
	}
	stop(c)
	if n := fr.Deletes.Load(); n != 1 {
		t.Errorf("%d DELETE requests at the close, want 1", n)
	}
}

// A request in flight when the server expires its session fails saying
// so; the next one is served in a new session.
func TestHTTPSessionExpiredInFlight(t *testing.T) {
	fr, ts := remoteServer(t, fakeremote.ModeStreamable)
	c := dialRemote(t, HTTP{URL: ts.URL}, Options{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "tools/call", toolParams(t, "cut", map[string]any{"retry_ms": 200}, nil), CallOptions{})
		done <- err
	}()
	eventually.True(t, "the call to reach the server", func() bool { return fr.Calls.Load() == 1 })
	fr.ExpireSessions() // before its resumption
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "ended the session this request ran in") {
		t.Errorf("the call in flight: %v", err)
	}
	if got := toolText(t, c, "echo", map[string]any{"text": "new"}, CallOptions{}); got != "remote: new" {
		t.Errorf("after the expiry: %q", got)
	}
}

// A response stream the server closes before answering is resumed with
// Last-Event-ID after the server's retry delay; the answer arrives.
func TestHTTPResume(t *testing.T) {
	fr, ts := remoteServer(t, fakeremote.ModeStreamable)
	c := dialRemote(t, HTTP{URL: ts.URL}, Options{})
	got := make(chan string, 4)
	o := CallOptions{Progress: func(p json.RawMessage) { got <- string(p) }}
	if text := toolText(t, c, "cut", map[string]any{"retry_ms": 100}, o); text != "answered after the cut" {
		t.Errorf("cut: %q", text)
	}
	if n := fr.Resumes.Load(); n < 1 {
		t.Errorf("%d resumptions", n)
	}
	if p := <-got; !strings.Contains(p, "before the cut") {
		t.Errorf("progress %s", p)
	}
}

// An error status fails its call with the status and the server's URL;
// the Conn serves the next call.
func TestHTTPErrorStatus(t *testing.T) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless} {
		t.Run(mode, func(t *testing.T) {
			fr, ts := remoteServer(t, mode)
			c := dialRemote(t, HTTP{URL: ts.URL}, Options{})
			toolText(t, c, "echo", nil, CallOptions{}) // the handshake's notification is through
			fr.FailNext(http.StatusBadGateway, 1)
			_, err := c.Call(context.Background(), "tools/call", toolParams(t, "echo", nil, nil), CallOptions{})
			var re *RemoteError
			if !errors.As(err, &re) || re.Status != http.StatusBadGateway || !strings.Contains(err.Error(), ts.URL+" answered 502 Bad Gateway: fakeremote: failing on purpose") {
				t.Errorf("the failed call: %v", err)
			}
			if got := toolText(t, c, "echo", map[string]any{"text": "next"}, CallOptions{}); got != "remote: next" {
				t.Errorf("after the 502: %q", got)
			}
		})
	}
}

// A server down at the start: Connect fails naming its URL. A server that
// goes down during a call: the call, and the Conn, end with an *ExitError
// saying it cannot be reached.
func TestHTTPServerDown(t *testing.T) {
	_, ts := remoteServer(t, fakeremote.ModeStreamable)
	url := ts.URL
	ts.Close()
	_, err := connectRemote(t, HTTP{URL: url}, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+url) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Connect to a server that is down: %v", err)
	}

	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless, fakeremote.ModeSSE} {
		t.Run(mode, func(t *testing.T) {
			fr, ts := remoteServer(t, mode)
			c := dialRemote(t, HTTP{URL: ts.URL, SSE: mode == fakeremote.ModeSSE}, Options{})
			done := make(chan error, 1)
			go func() {
				_, err := c.Call(context.Background(), "tools/call", toolParams(t, "slow", map[string]any{"delay_ms": 60000}, nil), CallOptions{})
				done <- err
			}()
			eventually.True(t, "the call to reach the server", func() bool { return fr.Calls.Load() == 1 })
			ts.CloseClientConnections()
			fr.Close() // its calls end, so that Close need not wait for them
			ts.Close()
			err := <-done
			if err == nil {
				t.Fatal("the call in flight succeeded")
			}
			t.Logf("the call in flight: %v", err)
			// The next request finds the server gone: the connection ends.
			_, _ = c.Call(context.Background(), "ping", nil, CallOptions{})
			select {
			case <-c.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the Conn did not end")
			}
			var exit *ExitError
			if !errors.As(c.Err(), &exit) || !strings.Contains(exit.Error(), "cannot reach "+ts.URL) {
				t.Errorf("the Conn's end: %v", c.Err())
			}
		})
	}
}

// A message over the limit fails its call with ErrResponseTooLong, as a
// stdio line does; one at the limit passes: a JSON body, an event's data.
func TestHTTPResponseLimit(t *testing.T) {
	const limit = 4096
	answer := func(id json.RawMessage, size int) []byte {
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id)
		tail := `"}]}}`
		return []byte(head + strings.Repeat("x", max(size-len(head)-len(tail), 0)) + tail)
	}
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("sse=", sse), func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						Arguments struct{ Size int } `json:"arguments"`
					} `json:"params"`
				}
				_ = json.NewDecoder(r.Body).Decode(&req)
				var body []byte
				switch req.Method {
				case "":
					w.WriteHeader(http.StatusAccepted)
					return
				case "initialize":
					body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"limit","version":"1"}}}`, req.ID)
				case "server/discover":
					body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.ID)
				default:
					body = answer(req.ID, req.Params.Arguments.Size)
				}
				if sse {
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprintf(w, "id: 1\ndata: %s\n\n", body)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			}))
			t.Cleanup(ts.Close)
			c := dialRemote(t, HTTP{URL: ts.URL}, Options{MaxLineBytes: limit})
			if _, err := c.Call(context.Background(), "tools/call", toolParams(t, "big", map[string]any{"size": limit}, nil), CallOptions{}); err != nil {
				t.Errorf("a message of exactly the limit: %v", err)
			}
			_, err := c.Call(context.Background(), "tools/call", toolParams(t, "big", map[string]any{"size": limit + 1}, nil), CallOptions{})
			if !errors.Is(err, ErrResponseTooLong) {
				t.Errorf("a message one byte over the limit: %v", err)
			}
			if _, err := c.Call(context.Background(), "tools/call", toolParams(t, "big", map[string]any{"size": 100}, nil), CallOptions{}); err != nil {
				t.Errorf("after the long one: %v", err)
			}
			if n := c.Stats().OversizeLines; n != 1 {
				t.Errorf("%d oversize messages counted", n)
			}
		})
	}
}

// The configured headers reach the server; a 2026 tools/call carries
// Mcp-Name and the Mcp-Param headers its tool's schema asks for.
func TestHTTPHeaders(t *testing.T) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless} {
		t.Run(mode, func(t *testing.T) {
			_, ts := remoteServer(t, mode)
			c := dialRemote(t, HTTP{URL: ts.URL, Header: http.Header{"X-Test": {"configured"}}}, Options{})
			if got := toolText(t, c, "headerecho", nil, CallOptions{}); got != "configured" {
				t.Errorf("headerecho: %q", got)
			}
			if mode != fakeremote.ModeStateless {
				return
			}
			if _, err := c.List(context.Background(), "tools/list"); err != nil {
				t.Fatal(err)
			}
			if got := toolText(t, c, "region", map[string]any{"region": "eu west"}, CallOptions{}); got != "eu west region" {
				t.Errorf("region: %q", got)
			}
		})
	}
}

// A 2026 server's error statuses carry JSON-RPC errors: they answer their
// requests as errors (not as HTTP failures).
func TestHTTPModernErrorBody(t *testing.T) {
	_, ts := remoteServer(t, fakeremote.ModeStateless)
	c := dialRemote(t, HTTP{URL: ts.URL}, Options{})
	_, err := c.Call(context.Background(), "no/such/method", json.RawMessage(`{}`), CallOptions{})
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeMethodNotFound {
		t.Errorf("an unknown method: %v", err)
	}
}

// notifications/initialized is acknowledged before the first request
// after the handshake is sent: separate POSTs are not ordered, and a
// server that processes the request first (server-everything's HTTP+SSE
// transport) answers it as for an uninitialized client.
func TestHTTPInitializedFirst(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch req.Method {
		case "notifications/initialized":
			time.Sleep(200 * time.Millisecond) // a slow acknowledgement
			note("initialized")
			w.WriteHeader(http.StatusAccepted)
			return
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"slow","version":"1"}}}`, req.ID)
			return
		case "tools/list":
			note("tools/list")
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, req.ID)
	}))
	t.Cleanup(ts.Close)
	c := dialRemote(t, HTTP{URL: ts.URL}, Options{Protocol: "2025-11-25"})
	if _, err := c.List(context.Background(), "tools/list"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "initialized" {
		t.Errorf("the server saw %v, want initialized first", order)
	}
}
