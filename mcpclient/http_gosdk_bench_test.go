package mcpclient

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/internal/fakeremote"
)

// BenchmarkGoSDKCall is BenchmarkHTTPCall with the Go SDK's own client:
// the baseline of the server's cost.
func BenchmarkGoSDKCall(b *testing.B) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless} {
		b.Run(mode, func(b *testing.B) {
			_, ts := remoteServer(b, mode)
			client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: testClient(b)}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
