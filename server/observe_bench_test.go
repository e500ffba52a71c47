package server

import (
	"context"
	"testing"

	"github.com/snodod/snodod/protocol"
)

type nopObserver struct{}

func (nopObserver) RequestEnded(RequestEnd) {}

// BenchmarkDispatchObserved is BenchmarkDispatch's legacy echo call with
// no Observer and with one that does nothing: what the hook itself costs.
func BenchmarkDispatchObserved(b *testing.B) {
	type echoIn struct {
		Text string `json:"text"`
	}
	for _, observed := range []bool{false, true} {
		name := "off"
		if observed {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			AddTool(s, &Tool{Name: "echo"}, func(_ context.Context, _ *CallToolRequest, in echoIn) (*CallToolResult, any, error) {
				return &CallToolResult{Content: []Content{TextContent(in.Text)}}, nil, nil
			})
			if observed {
				s.SetObserver(nopObserver{})
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
