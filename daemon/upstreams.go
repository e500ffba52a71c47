package daemon

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/upstream"
)

// The daemon's side of hosted upstreams (docs/upstreams.md): one
// upstream.Manager runs them under the root supervisor; every generation's
// server shows the aggregated view; a session asks for its view and
// working directory with the hand-over; status, snodod upstream and snodod
// logs reach the Manager through the control socket.

// UpstreamsURI is the resource of the daemon's catalog that lists the
// upstreams' status (docs/upstreams.md §8).
const UpstreamsURI = "snodod://upstreams"

// openUpstreams makes the manager of cfg's upstreams; it runs once Run
// owns the sockets.
func (d *Daemon) openUpstreams(cfg *config.Config) error {
	stateDir := d.opts.StateDir
	if stateDir == "" {
		stateDir = config.StateDir(nil)
	}
	sum := sha256.Sum256([]byte(cfg.Daemon.Socket))
	m, err := upstream.New(cfg, upstream.Options{
		StateDir: stateDir, RecordName: "groups-" + hex.EncodeToString(sum[:6]),
		Version: d.version(), MaxLineBytes: cfg.Limits.MaxLineBytes,
		ShutdownGrace: cfg.Limits.ShutdownGrace, Logger: d.log,
	})
	if err != nil {
		return err
	}
	d.ups = m
	return nil
}

// attachUpstreams makes a daemon server (built by the catalog's Host, once
// per server: reloads keep it) show the aggregated view and serve the
// snodod://upstreams resource.
func (d *Daemon) attachUpstreams(srv *server.Server) {
	srv.AddResource(&server.Resource{URI: UpstreamsURI, Name: "upstreams", MIMEType: "application/json",
		Description: "The hosted MCP servers (mcpServers): one row per instance, as snodod status shows them."},
		func(context.Context, *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			b, err := json.MarshalIndent(d.ups.Status(), "", "  ")
			if err != nil {
				return nil, err
			}
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: UpstreamsURI, MIMEType: "application/json", Text: string(b)}}}, nil
		})
	d.ups.Attach(srv, srv.Instructions())
}

// dispatcher is the Dispatcher of a new session of g: the aggregated view
// (view "") or the named upstream passed through, for a client working in
// cwd; end releases what the session holds on upstreams.
func (d *Daemon) dispatcher(id uint64, g *generation, view, cwd string) (server.Dispatcher, func(), error) {
	s, err := d.ups.Session(id, view, cwd, g.srv)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

// upstreamOp serves {"op":"upstream","name":…,"action":"start|stop|restart"}.
func (d *Daemon) upstreamOp(req Request) Reply {
	var err error
	switch req.Action {
	case "start":
		err = d.ups.Start(req.Name)
	case "stop":
		err = d.ups.Stop(req.Name)
	case "restart":
		err = d.ups.Restart(req.Name)
	default:
		err = fmt.Errorf("unknown upstream action %q; the actions are start, stop and restart", req.Action)
	}
	if err != nil {
		return Reply{Error: err.Error()}
	}
	return Reply{OK: true}
}

// LogLine is one line of a logs reply after its head: stderr bytes of the
// upstream, as text (invalid UTF-8 replaced).
type LogLine struct {
	Log string `json:"log"`
}

// serveLogs serves {"op":"logs","name":…,"follow":bool}: the upstream's
// stderr ring, then with follow what it writes from then on, until the
// client leaves or the daemon drains.
func (d *Daemon) serveLogs(c *net.UnixConn, req Request) {
	ring, err := d.ups.Logs(req.Name)
	if err != nil {
		reply(c, Reply{Error: err.Error()})
		return
	}
	var ch <-chan []byte
	var cancel func()
	if req.Follow {
		ch, cancel = ring.Follow()
		defer cancel()
	}
	if !reply(c, Reply{OK: true}) || !reply(c, LogLine{Log: string(ring.Snapshot())}) || !req.Follow {
		return
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		b := make([]byte, 1)
		_, _ = c.Read(b) // the client closing its side ends the follow
	}()
	for {
		select {
		case b, ok := <-ch:
			if !ok || !reply(c, LogLine{Log: string(b)}) {
				return
			}
		case <-gone:
			return
		case <-d.draining.Done():
			return
		}
	}
}

// UpstreamAction asks the daemon at the control socket path to start,
// stop or restart the upstream name.
func UpstreamAction(ctx context.Context, path, name, action string) error {
	return ask(ctx, path, Request{Op: "upstream", Name: name, Action: action}, nil)
}

// Logs writes the stderr the daemon at path keeps for upstream name to
// write; with follow it goes on writing what the upstream writes until ctx
// ends or the daemon goes.
func Logs(ctx context.Context, path, name string, follow bool, write func(string) error) error {
	return converse(ctx, path, Request{Op: "logs", Name: name, Follow: follow}, nil, func(r *bufio.Reader) error {
		for {
			b, err := r.ReadBytes('\n')
			if err != nil {
				if ctx.Err() != nil || !follow {
					return nil
				}
				return ErrDaemonGone
			}
			var l LogLine
			if json.Unmarshal(b, &l) == nil {
				if err := write(l.Log); err != nil {
					return err
				}
			}
			if !follow {
				return nil
			}
		}
	})
}
