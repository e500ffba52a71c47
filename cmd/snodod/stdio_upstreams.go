package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/upstream"
)

// unknownUpstream says that name is not an mcpServers entry of cfg, and
// which are.
func unknownUpstream(cfg *config.Config, name string) string {
	var names []string
	for _, u := range cfg.MCPServers {
		names = append(names, u.Name)
	}
	if len(names) == 0 {
		return fmt.Sprintf("no hosted server %q: no mcpServers are configured", name)
	}
	return fmt.Sprintf("no hosted server %q; the configured ones are %s", name, strings.Join(names, ", "))
}

// stdioHosted is cfg's hosted servers run inside this snodod stdio
// process, as the daemon would run them for one session. The children die
// with the process (parent-death signal), so no record of their process
// groups is kept; the catalog cache is the daemon's.
type stdioHosted struct {
	m *upstream.Manager
}

// stdioUpstreams prepares cfg's hosted servers; nil when there are none
// and no view asks for one.
func stdioUpstreams(cfg *config.Config, view string) (*stdioHosted, error) {
	if len(cfg.MCPServers) == 0 && view == "" {
		return nil, nil
	}
	m, err := upstream.New(cfg, upstream.Options{
		StateDir: config.StateDir(nil), NoRecord: true,
		Version: buildVersion(), MaxLineBytes: cfg.Limits.MaxLineBytes,
		ShutdownGrace: cfg.Limits.ShutdownGrace, Logger: slog.Default(),
	})
	if err != nil {
		return nil, err
	}
	return &stdioHosted{m: m}, m.Has(view)
}

// attach shows the aggregated view on a server the catalog builds (its
// Register hook); a nil stdioHosted has nothing to attach.
func (h *stdioHosted) attach(srv *server.Server) {
	if h != nil {
		h.m.Attach(srv, srv.Instructions())
	}
}

// session starts the servers (stop stops them all, within the shutdown
// grace) and returns the Dispatcher of the process's one session: srv's
// aggregated view (view "") or the named server passed through.
func (h *stdioHosted) session(srv *server.Server, view string) (server.Dispatcher, func(), error) {
	cwd, _ := os.Getwd()
	sess, err := h.m.Session(0, view, cwd, srv)
	if err != nil {
		return nil, nil, err
	}
	sess.Client.MayLogIn = true // the process's own client: its user's
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.m.Serve(ctx)
	}()
	return sess, func() {
		sess.Close()
		cancel()
		<-done
	}, nil
}
