package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon"
	"github.com/snodod/snodod/server"
)

type forecastIn struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

// A program that hosts its own tool in the daemon, under its own name. The
// Config is built by hand: every limit it leaves zero takes its default
// (daemon.max_sessions 1024, …). A real program loads it with config.Load
// and stops on a signal: docs/embedding.md has that program.
func Example() {
	dir, _ := os.MkdirTemp("", "weather")
	defer os.RemoveAll(dir)
	cfg := &config.Config{Daemon: config.Daemon{Socket: filepath.Join(dir, "weather.sock")}}

	d, err := daemon.New(cfg, daemon.Options{
		Name:    "weather", // the status tool says "weather 1.0.0, up …"
		Version: "1.0.0",
		Logger:  slog.New(slog.DiscardHandler),
		Catalog: func(s *server.Server) {
			server.AddTool(s, &server.Tool{Name: "forecast", Description: "Today's temperature in a city"},
				func(_ context.Context, _ *server.CallToolRequest, in forecastIn) (*server.CallToolResult, any, error) {
					return &server.CallToolResult{Content: []server.Content{server.TextContent("21.5 °C in " + in.City)}}, nil, nil
				})
		},
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-d.Ready()

	// A client of the session socket: two stateless 2026-07-28 calls.
	c, err := net.Dial("unix", cfg.Daemon.Socket)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"},`+meta+`}}`)
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"status","arguments":{},`+meta+`}}`)
	answers := bufio.NewScanner(c)
	for range 2 {
		answers.Scan()
		var r struct {
			ID     int
			Result struct{ Content []struct{ Text string } }
		}
		_ = json.Unmarshal(answers.Bytes(), &r)
		fmt.Println(r.ID, r.Result.Content[0].Text)
	}
	stop() // as SIGTERM would: drain, then Run returns
	if err := <-done; err != nil {
		panic(err)
	}
	// Unordered output:
	// 1 21.5 °C in Oslo
	// 2 weather 1.0.0, up 0s
}
