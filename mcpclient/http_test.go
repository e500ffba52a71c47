package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/fakeremote"
	"github.com/snodod/snodod/protocol"
)

// remoteServer serves a fakeremote server in mode on loopback until the
// test ends.
func remoteServer(t testing.TB, mode string) (*fakeremote.Server, *httptest.Server) {
	t.Helper()
	fr := fakeremote.New("remote")
	ts := httptest.NewUnstartedServer(fr.Handler(mode))
	ts.Config.ConnState = fr.ConnState
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		fr.Close()
	})
	return fr, ts
}

// testClient is an HTTP client whose idle connections close when the
// test ends (goleak).
func testClient(t testing.TB) *http.Client {
	t.Helper()
	base, err := NewHTTPTransport("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: base}
}

// dialRemote connects a Conn to the server at url, stopped when the test
// ends.
func dialRemote(t testing.TB, tr HTTP, o Options) *Conn {
	t.Helper()
	c, err := connectRemote(t, tr, o)
	if err != nil {
		t.Fatalf("Connect %s: %v", tr.URL, err)
	}
	t.Cleanup(func() { stop(c) })
	return c
}

func connectRemote(t testing.TB, tr HTTP, o Options) (*Conn, error) {
	t.Helper()
	if tr.Client == nil {
		tr.Client = testClient(t)
	}
	if o.Name == "" {
		o.Name = "remote"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Connect(ctx, tr, o)
}

// toolText calls a tool and returns its first text content.
func toolText(t testing.TB, c *Conn, name string, args any, o CallOptions) string {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/call", toolParams(t, name, args, nil), o)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return resultText(t, res)
}

func resultText(t testing.TB, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", res, err)
	}
	if r.IsError {
		t.Fatalf("isError result: %s", res)
	}
	return r.Content[0].Text
}

// Every era of the Go SDK's servers: the probe finds it, calls, lists,
// progress and resource reads cross, and the server's own requests reach
// the Handler (over the POST's stream in 2025, the only way in 2024-11-05).
func TestHTTPEras(t *testing.T) {
	for _, tt := range []struct {
		name, mode string
		sse        bool // type = "sse"
		path       string
		era        string
		version    string
	}{
		{"streamable", fakeremote.ModeStreamable, false, "", EraLegacy, "2025-11-25"},
		{"stateless", fakeremote.ModeStateless, false, "", Era2026, "2026-07-28"},
		{"sse", fakeremote.ModeSSE, true, "", EraLegacy, "2025-11-25"},
		{"sse by fallback", fakeremote.ModeSSE, false, "", EraLegacy, "2025-11-25"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := remoteServer(t, tt.mode)
			h := &recorder{answer: func(method string) (json.RawMessage, *protocol.Error) {
				return json.RawMessage(`{"action":"accept","content":{"name":"Gopher"}}`), nil
			}}
			c := dialRemote(t, HTTP{URL: ts.URL + tt.path, SSE: tt.sse}, Options{Handler: h, ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)})
			if c.Era() != tt.era || c.Version() != tt.version {
				t.Errorf("era %s %s, want %s %s", c.Era(), c.Version(), tt.era, tt.version)
			}
			if c.PID() != 0 {
				t.Errorf("PID %d for a remote server", c.PID())
			}
			if got := toolText(t, c, "echo", map[string]any{"text": "hi"}, CallOptions{}); got != "remote: hi" {
				t.Errorf("echo: %q", got)
			}
			tools, err := c.List(context.Background(), "tools/list")
			if err != nil || len(tools) < 5 {
				t.Errorf("tools/list: %d tools, %v", len(tools), err)
			}
			var mu sync.Mutex
			var reports []string
			o := CallOptions{Progress: func(p json.RawMessage) {
				mu.Lock()
				reports = append(reports, string(p))
				mu.Unlock()
			}}
			if got := toolText(t, c, "steps", map[string]any{"steps": 3}, o); got != "3 steps" {
				t.Errorf("steps: %q", got)
			}
			mu.Lock()
			if len(reports) != 3 || !strings.Contains(reports[2], `"progress":3`) {
				t.Errorf("progress: %v", reports)
			}
			mu.Unlock()
			res, err := c.Call(context.Background(), "resources/read", json.RawMessage(`{"uri":"test://hello"}`), CallOptions{})
			if err != nil || !strings.Contains(string(res), "hello from remote") {
				t.Errorf("resources/read: %s %v", res, err)
			}
			if tt.era == EraLegacy {
				if got := toolText(t, c, "ask", nil, CallOptions{}); got != "accept: Gopher" {
					t.Errorf("ask: %q", got)
				}
			}
			_, err = c.Call(context.Background(), "tools/call", toolParams(t, "nosuch", nil, nil), CallOptions{})
			var perr *protocol.Error
			res, _ = c.Call(context.Background(), "tools/call", toolParams(t, "nosuch", nil, nil), CallOptions{})
			if !errors.As(err, &perr) && !strings.Contains(string(res), "isError") {
				t.Errorf("an unknown tool: %v %s", err, res)
			}
		})
	}
}

// BenchmarkHTTPCall is one tools/call to the Go SDK's server on loopback
// through the HTTP transport, per era (compare the go-sdk's own client:
// the remote hop's cost is what this adds to it).
func BenchmarkHTTPCall(b *testing.B) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless} {
		b.Run(mode, func(b *testing.B) {
			_, ts := remoteServer(b, mode)
			c := dialRemote(b, HTTP{URL: ts.URL}, Options{})
			params := toolParams(b, "echo", map[string]any{"text": "x"}, nil)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Call(context.Background(), "tools/call", params, CallOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
