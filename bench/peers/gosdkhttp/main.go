// Command gosdkhttp is a peer server for snodod's HTTP benchmark
// (the HTTP scenario of bench/cmd/mcpbench): the demo tool echo on the official Go MCP SDK,
// served by its streamable HTTP handler in stateless mode with JSON
// responses, the SDK's documented setup for 2026-07-28.
//
//	gosdkhttp -addr 127.0.0.1:0
//
// It prints "listening ADDR" on standard output once it accepts, and
// serves until killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"The text to return."`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on")
	flag.Parse()
	s := mcp.NewServer(&mcp.Implementation{Name: "go-sdk-http-peer", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text argument unchanged, as one text content block."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening", ln.Addr())
	log.Fatal(http.Serve(ln, h))
}
