// Command gosdk is a peer server for snodod's benchmark: the demo tools of
// `snodod stdio --demo` (echo, sleep, big) on the official Go MCP SDK
// (github.com/modelcontextprotocol/go-sdk), served over stdio as the SDK's
// documentation shows. It exits when standard input ends.
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The demo tools' limits, as in snodod's catalog.
const (
	maxSleepMs  = 3_600_000
	maxBigBytes = 64 << 20
)

type echoIn struct {
	Text string `json:"text" jsonschema:"The text to return."`
}

type sleepIn struct {
	Ms int64 `json:"ms" jsonschema:"How long to sleep, in milliseconds."`
}

type bigIn struct {
	Bytes int64 `json:"bytes" jsonschema:"The length of the text, in bytes."`
}

func text(t string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "go-sdk-peer", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text argument unchanged, as one text content block."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleeps for ms milliseconds, then returns \"done\". Honours cancellation."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			if in.Ms < 0 || in.Ms > maxSleepMs {
				return nil, nil, fmt.Errorf("sleep: ms must be in [0, %d]", maxSleepMs)
			}
			t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-t.C:
				return text("done"), nil, nil
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns one text content block of exactly the requested number of bytes (at most 64 MiB)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			if in.Bytes < 0 || in.Bytes > maxBigBytes {
				return nil, nil, fmt.Errorf("big: bytes must be in [0, %d]", maxBigBytes)
			}
			return text(strings.Repeat("x", int(in.Bytes))), nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
