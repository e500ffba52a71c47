package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/snodod/snodod/server"
)

// Status registers the status tool on s: status {} returns the server's
// version and how long it has been up since started, as one text block,
// for example "snodod 1.0.0, up 1h2m3s".
func Status(s *server.Server, version string, started time.Time) {
	s.AddTool(server.Tool{
		Name:        "status",
		Description: "Returns the snodod version and its uptime.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
			up := time.Since(started).Round(time.Second)
			return server.TextResult(fmt.Sprintf("snodod %s, up %s", version, up)), nil
		},
	})
}
