package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/snodod/snodod/catalog"
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
		h.m.Attach(srv, srv.Instructions()) // for the process's life
	}
}

// session starts the servers (stop stops them all, within the shutdown
// grace) and returns the dispatcher of the process's one session and its
// state, which says who asks: srv's aggregated view (view "") or the named
// server passed through, built from cfg as the aggregated one is.
func (h *stdioHosted) session(cfg *config.Config, srv *server.Server, view string) (*server.Server, *server.SessionState, func(), error) {
	cwd, _ := os.Getwd()
	caller := &server.Caller{Cwd: cwd, View: view, MayLogIn: true} // the process's own client: its user's
	detach := func() {}
	if view != "" {
		var err error
		if srv, err = catalog.ViewServer(cfg, view, slog.Default()); err != nil {
			return nil, nil, nil, err
		}
	}
	release, err := h.m.Open(caller)
	if err != nil {
		return nil, nil, nil, err
	}
	if view != "" {
		detach = h.m.AttachView(srv, view)
	}
	h.m.Warm(caller)
	ss := server.NewSessionState(cfg.Limits.MaxSubscriptions)
	ss.SetCaller(caller)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.m.Serve(ctx)
	}()
	return srv, ss, func() {
		release()
		ss.Close()
		detach()
		cancel()
		<-done
	}, nil
}
