package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/upstream"
)

// printConfigWarnings writes what `snodod config check` reports without
// failing: the configuration's own warnings, then what the catalog cache
// of the hosted servers that have run tells about the aggregated view
// (names taken by an earlier claimant, names shortened over 64
// characters). Nothing is started.
func printConfigWarnings(w io.Writer, cfg *config.Config) {
	for _, p := range cfg.Warnings() {
		fmt.Fprintf(w, "warning: %s\n", p)
	}
	if len(cfg.MCPServers) == 0 {
		return
	}
	quiet := slog.New(slog.DiscardHandler)
	srv, err := catalog.NewServer(cfg, catalog.Build{Version: buildVersion()}, quiet)
	if err != nil {
		return
	}
	m, err := upstream.New(cfg, upstream.Options{StateDir: config.StateDir(nil), NoRecord: true, Logger: quiet})
	if err != nil {
		return
	}
	m.Attach(srv, cfg.Server.Instructions)
	for _, r := range m.Status() {
		for _, c := range r.Collided {
			fmt.Fprintf(w, "warning: mcpServers.%s: %s is not listed in the aggregated view\n", r.Name, c)
		}
		for _, s := range r.Shortened {
			fmt.Fprintf(w, "warning: mcpServers.%s: the name is over 64 characters with its prefix; the tool %s\n", r.Name, s)
		}
	}
}
