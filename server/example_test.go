package server_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// A typed tool: the input and output schemas are inferred from the Go types,
// arguments are validated before the handler runs, and the output becomes
// structuredContent. Any transport hands requests to Dispatch; here a
// 2026-07-28 request is dispatched directly.
func Example() {
	s, err := server.New(server.Options{Info: protocol.Implementation{Name: "weather", Version: "1.0.0"}})
	if err != nil {
		panic(err)
	}
	type forecastIn struct {
		City string `json:"city" jsonschema:"the city to look up"`
	}
	type forecastOut struct {
		TempC float64 `json:"tempC"`
	}
	server.AddTool(s, &server.Tool{Name: "forecast", Description: "Today's temperature in a city"},
		func(ctx context.Context, req *server.CallToolRequest, in forecastIn) (*server.CallToolResult, forecastOut, error) {
			server.ReportProgress(ctx, server.Progress{Progress: 1, Total: 1, HasTotal: true})
			return nil, forecastOut{TempC: 21.5}, nil
		})

	params := `{"name":"forecast","arguments":{"city":"Oslo"},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
	out := s.Dispatch(context.Background(), &server.Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(params)})
	result, _ := json.Marshal(out.Result)
	fmt.Println(string(result))
	// Output:
	// {"resultType":"complete","content":[{"type":"text","text":"{\"tempC\":21.5}"}],"structuredContent":{"tempC":21.5},"isError":false,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"weather","version":"1.0.0"}}}
}
