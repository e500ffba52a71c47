package server

import (
	"context"
	"testing"

	"github.com/snodod/snodod/protocol"
)

type nopObserver struct{}

func (nopObserver) RequestEnded(RequestEnd) {}

// idleObserver is an Observer that is always idle (Idler): the daemon's
// audit log's sink while the log, the metrics and the traces are off.
type idleObserver struct{ nopObserver }

func (idleObserver) Idle() bool { return true }

// BenchmarkDispatchObserved is BenchmarkDispatch's legacy echo call with
// no Observer, with one that does nothing (what the hook itself costs),
// and with an idle one (what a daemon with nothing observing pays).
func BenchmarkDispatchObserved(b *testing.B) {
	type echoIn struct {
		Text string `json:"text"`
	}
	for _, name := range []string{"off", "on", "idle"} {
		b.Run(name, func(b *testing.B) {
			s, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			AddTool(s, &Tool{Name: "echo"}, func(_ context.Context, _ *CallToolRequest, in echoIn) (*CallToolResult, any, error) {
				return &CallToolResult{Content: []Content{TextContent(in.Text)}}, nil, nil
			})
			switch name {
			case "on":
				s.SetObserver(nopObserver{})
			case "idle":
				s.SetObserver(idleObserver{})
			}
			msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench-1"}}}`))
			sess := NewSessionState(0)
			sess.SetNegotiated(protocol.Version20250618)
			req := &Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess,
				Header: map[string][]string{HeaderProtocolVersion: {protocol.Version20250618}}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if o := s.Dispatch(ctx, req); o.Err != nil {
					b.Fatal(o.Err)
				}
			}
		})
	}
}
