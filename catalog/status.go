package catalog

import (
	"context"
	"fmt"
	"strings"
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
	statusTool(s, Build{Name: name, Version: version, Started: started})
}

// statusTool registers the status tool of b: its name, version and uptime,
// then a "warning: …" line for each of b.Warnings (what the configured
// items could not do, as `snodod status` shows them).
func statusTool(s *server.Server, b Build) {
	server.AddTool(s, &server.Tool{
		Name:        "status",
		Description: "Returns the " + b.Name + " version and its uptime, and what its configured tools, resources and prompts could not do.",
	}, func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
		up := time.Since(b.Started).Round(time.Second)
		var text strings.Builder
		fmt.Fprintf(&text, "%s %s, up %s", b.Name, b.Version, up)
		if b.Warnings != nil {
			for _, w := range b.Warnings() {
				text.WriteString("\nwarning: " + w)
			}
		}
		return textResult(text.String()), nil, nil
	})
}
