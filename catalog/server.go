package catalog

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Build says which build of snodod is serving, for serverInfo and status.
type Build struct {
	// Name is the product's name in the status tool, and serverInfo.name
	// when server.name is empty; empty means "snodod". A program that
	// embeds the daemon names itself here.
	Name    string
	Version string
	Started time.Time
	// Warnings, when set, lists what the configured items could not do
	// (Host.Warnings), for the status tool; a Host sets its own.
	Warnings func() []string
}

// NewServer builds the runtime cfg describes (server info, instructions,
// protocol versions, cache fields) with the daemon's own status tool
// registered, signing with the key of server.state_key_file when one is
// configured. It advertises resources.subscribe whenever it has resources:
// every resource the daemon serves reports its updates (configured
// folders, the demo's watched resource, relayed upstream resources).
// Callers add their own tools to the returned server.
func NewServer(cfg *config.Config, b Build, log *slog.Logger) (*server.Server, error) {
	version := cfg.Server.Version
	if version == "" {
		version = b.Version
	}
	name := b.Name
	if name == "" {
		name = "snodod"
	}
	info := cfg.Server.Name
	if info == "" { // a Config built by hand
		info = name
	}
	var stateKey []byte
	if cfg.Server.StateKeyFile != "" {
		var err error
		if stateKey, err = server.LoadStateKey(cfg.Server.StateKeyFile); err != nil {
			return nil, err
		}
	}
	srv, err := server.New(server.Options{
		Info: protocol.Implementation{
			Name:        info,
			Version:     version,
			Title:       cfg.Server.Title,
			Description: cfg.Server.Description,
			WebsiteURL:  cfg.Server.WebsiteURL,
		},
		Instructions:          cfg.Server.Instructions,
		Versions:              cfg.Protocol.Versions,
		CacheTTL:              cfg.Server.CacheTTL,
		CacheScope:            cfg.Server.CacheScope,
		SubscribableResources: true,
		Logger:                log,
		StateKey:              stateKey,
	})
	if err != nil {
		return nil, fmt.Errorf("build the server: %w", err)
	}
	b.Name = name
	statusTool(srv, b)
	return srv, nil
}
