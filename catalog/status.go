package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/snodod/snodod/server"
)

// Status registers the status tool on s: status {} returns the server's
// version and how long it has been up since started, as one text block,
// for example "snodod 1.0.0, up 1h2m3s".
func Status(s *server.Server, version string, started time.Time) {
	StatusNamed(s, "snodod", version, started)
}

// StatusNamed is Status for a product called name (a program that embeds
// the daemon): "name 1.0.0, up 1h2m3s".
func StatusNamed(s *server.Server, name, version string, started time.Time) {
	server.AddTool(s, &server.Tool{
		Name:        "status",
		Description: "Returns the " + name + " version and its uptime.",
	}, func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
		up := time.Since(started).Round(time.Second)
		return textResult(fmt.Sprintf("%s %s, up %s", name, version, up)), nil, nil
	})
}
