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

// hostUpstreams runs cfg's hosted servers inside this snodod stdio
// process, as the daemon would for one session: the manager serves until
// the returned stop is called (which stops every child within the
// shutdown grace), and the Dispatcher is the session's view: srv with
// every upstream (view "") or the named one passed through. The children
// die with the process (parent-death signal), so no record of their
// process groups is kept; the catalog cache is the daemon's.
func hostUpstreams(cfg *config.Config, srv *server.Server, view string) (server.Dispatcher, func(), error) {
	m, err := upstream.New(cfg, upstream.Options{
		StateDir: config.StateDir(nil), NoRecord: true,
		Version: buildVersion(), MaxLineBytes: cfg.Session.MaxLineBytes,
		ShutdownGrace: cfg.Daemon.ShutdownGrace, Logger: slog.Default(),
	})
	if err != nil {
		return nil, nil, err
	}
	if err := m.Has(view); err != nil {
		return nil, nil, err
	}
	m.Attach(srv, cfg.Server.Instructions)
	cwd, _ := os.Getwd()
	sess, err := m.Session(0, view, cwd, srv)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Serve(ctx)
	}()
	return sess, func() {
		sess.Close()
		cancel()
		<-done
	}, nil
}
