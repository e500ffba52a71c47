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
	opts, err := runtimeOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	opts.Info = protocol.Implementation{
		Name:        info,
		Version:     version,
		Title:       cfg.Server.Title,
		Description: cfg.Server.Description,
		WebsiteURL:  cfg.Server.WebsiteURL,
	}
	opts.Instructions = cfg.Server.Instructions
	opts.SubscribableResources = true
	srv, err := server.New(opts)
	if err != nil {
		return nil, fmt.Errorf("build the server: %w", err)
	}
	b.Name = name
	statusTool(srv, b)
	return srv, nil
}

// ViewServer builds the server of upstream name's pass-through view
// (docs/upstreams.md §2): the runtime of cfg as NewServer builds it
// (protocol versions, cache fields, the key of server.state_key_file, so
// that its cursors and request states verify on every node sharing the
// key), under the upstream's name, with nothing registered: the view
// relays the upstream's items and advertises its capabilities.
func ViewServer(cfg *config.Config, name string, log *slog.Logger) (*server.Server, error) {
	opts, err := runtimeOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	opts.Info = protocol.Implementation{Name: name, Version: "unknown"}
	srv, err := server.New(opts)
	if err != nil {
		return nil, fmt.Errorf("build the view of %s: %w", name, err)
	}
	return srv, nil
}

// runtimeOptions are the server options every server of cfg shares,
// whichever view it serves.
func runtimeOptions(cfg *config.Config, log *slog.Logger) (server.Options, error) {
	var stateKey []byte
	if cfg.Server.StateKeyFile != "" {
		var err error
		if stateKey, err = server.LoadStateKey(cfg.Server.StateKeyFile); err != nil {
			return server.Options{}, err
		}
	}
	return server.Options{
		Versions:   cfg.Protocol.Versions,
		CacheTTL:   cfg.Server.CacheTTL,
		CacheScope: cfg.Server.CacheScope,
		Logger:     log,
		StateKey:   stateKey,
	}, nil
}
