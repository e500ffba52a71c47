package server

import (
	"context"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// BenchmarkDispatch is the runtime's share of one echo tools/call, the
// request the bench harness sends, decoded as a transport decodes it: no
// executor, no transport.
func BenchmarkDispatch(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	AddTool(s, &Tool{Name: "echo"}, func(_ context.Context, _ *CallToolRequest, in echoIn) (*CallToolResult, any, error) {
		return &CallToolResult{Content: []Content{TextContent(in.Text)}}, nil, nil
	})
	for _, bc := range []struct{ name, line string }{
		{"2026", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench-1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		{"2025", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench-1"}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			msg := protocol.Decode([]byte(bc.line))
			sess := NewSessionState(0)
			req := &Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess}
			if !msg.Modern {
				sess.SetNegotiated(protocol.Version20250618)
				req.Header = map[string][]string{HeaderProtocolVersion: {protocol.Version20250618}}
			}
			ctx := context.Background()
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				o := s.Dispatch(ctx, req)
				if o.Err != nil {
					b.Fatal(o.Err)
				}
				if buf, err = protocol.AppendResult(buf[:0], msg.ID, o.Result); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
