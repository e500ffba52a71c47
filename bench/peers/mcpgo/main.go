// Command mcpgo is a peer server for snodod's benchmark: the demo tools of
// `snodod stdio --demo` (echo, sleep, big) on github.com/mark3labs/mcp-go,
// served over stdio with server.ServeStdio and its defaults, as the
// library's documentation shows. It exits when standard input ends.
package main

import (
	"context"
	"log"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The demo tools' limits, as in snodod's catalog.
const (
	maxSleepMs  = 3_600_000
	maxBigBytes = 64 << 20
)

func main() {
	s := server.NewMCPServer("mcp-go-peer", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns its text argument unchanged, as one text content block."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The text to return.")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		t, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(t), nil
	})
	s.AddTool(mcp.NewTool("sleep",
		mcp.WithDescription("Sleeps for ms milliseconds, then returns \"done\". Honours cancellation."),
		mcp.WithInteger("ms", mcp.Required(), mcp.Min(0), mcp.Max(maxSleepMs), mcp.Description("How long to sleep, in milliseconds.")),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ms, err := req.RequireInt("ms")
		if err != nil || ms < 0 || ms > maxSleepMs {
			return mcp.NewToolResultError("sleep: ms must be an integer in [0, 3600000]"), nil
		}
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return mcp.NewToolResultText("done"), nil
		}
	})
	s.AddTool(mcp.NewTool("big",
		mcp.WithDescription("Returns one text content block of exactly the requested number of bytes (at most 64 MiB)."),
		mcp.WithInteger("bytes", mcp.Required(), mcp.Min(0), mcp.Max(maxBigBytes), mcp.Description("The length of the text, in bytes.")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n, err := req.RequireInt("bytes")
		if err != nil || n < 0 || n > maxBigBytes {
			return mcp.NewToolResultError("big: bytes must be an integer in [0, 67108864]"), nil
		}
		return mcp.NewToolResultText(strings.Repeat("x", n)), nil
	})
	if err := server.ServeStdio(s); err != nil {
		log.Fatal(err)
	}
}
