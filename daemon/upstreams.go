package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
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
		ShutdownGrace: cfg.Limits.ShutdownGrace, Logger: d.log, Observer: d.observer(),
	})
	if err != nil {
		return err
	}
	d.ups = m
	return nil
}

// attachUpstreams makes a daemon server (built by the catalog's Host, once
// per server: reloads keep it) serve the snodod://upstreams resource. The
// generation that first uses the server attaches it to the upstreams
// (views.go).
func (d *Daemon) attachUpstreams(srv *server.Server) {
	if o := d.observer(); o != nil {
		srv.SetObserver(o) // the metrics (admin.go)
	}
	srv.AddResource(&server.Resource{URI: UpstreamsURI, Name: "upstreams", MIMEType: "application/json",
		Description: "The hosted MCP servers (mcpServers): one row per instance, as snodod status shows them."},
		func(context.Context, *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			b, err := json.MarshalIndent(upstreamRows(d.ups.Status()), "", "  ")
			if err != nil {
				return nil, err
			}
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: UpstreamsURI, MIMEType: "application/json", Text: string(b)}}}, nil
		})
}

// open opens the session of e under g, which it holds until the session
// ends: its caller, registered with the upstreams, and the server of its
// view, the aggregated one (view "") or the named upstream passed
// through, whose start begins now; end releases what the session holds.
func (d *Daemon) open(e *entry, g *generation) (*server.Server, *server.Caller, *generation, func(), error) {
	g = d.hold(g)
	caller := &server.Caller{Session: e.id, Cwd: e.at.cwd, View: e.at.view, MayLogIn: e.uid == d.uid,
		Peer: peerOf(e.uid, e.pid)}
	release, err := d.ups.Open(caller)
	if err != nil {
		g.release()
		return nil, nil, nil, nil, err
	}
	srv := g.srv
	if upstream.NamedView(caller.View) {
		if srv = g.named[caller.View]; srv == nil {
			_, err := namedView(g, caller.View)
			if err == nil { // configured since g was built: a reload is under way
				err = fmt.Errorf("view %q is not served yet; try again", caller.View[1:])
			}
			release()
			g.release()
			return nil, nil, nil, nil, err
		}
	} else if caller.View != "" {
		if srv = g.views[caller.View]; srv == nil {
			// Configured since g was built: a reload is under way.
			release()
			g.release()
			return nil, nil, nil, nil, fmt.Errorf("upstream %q is not served yet; try again", caller.View)
		}
	}
	d.ups.Warm(caller)
	return srv, caller, g, func() {
		release()
		g.release()
	}, nil
}

// upstreamOp serves {"op":"upstream","name":…,"action":"start|stop|restart"}:
// it gives the order, then waits until it is done (the upstream's
// start_timeout, plus the grace of the stop before a restart), and
// answers with each instance's state then.
func (d *Daemon) upstreamOp(req control.Request) control.Reply {
	since := time.Now()
	var err error
	switch req.Action {
	case control.ActionStart:
		err = d.ups.Start(req.Name)
	case control.ActionStop:
		err = d.ups.Stop(req.Name)
	case control.ActionRestart:
		err = d.ups.Restart(req.Name)
	default:
		err = fmt.Errorf("unknown upstream action %q; the actions are start, stop and restart", req.Action)
	}
	if err != nil {
		return control.Reply{Error: err.Error()}
	}
	cfg := d.Config()
	bound := cfg.Limits.ShutdownGrace + actionMargin
	for _, u := range cfg.MCPServers {
		if u.Name == req.Name {
			bound += u.StartTimeout
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	rows, err := d.ups.Await(ctx, req.Name, req.Action != control.ActionStop, since)
	if err != nil {
		return control.Reply{Error: err.Error()}
	}
	r := control.Reply{OK: true}
	for _, row := range rows {
		r.Instances = append(r.Instances, control.Instance{Instance: row.Instance, State: string(row.State), PID: row.PID, Cause: row.Cause})
	}
	return r
}

// actionMargin is added to the bound of an upstream action's wait: the
// loop's own turns between the order and the start.
const actionMargin = 5 * time.Second

// serveLogs serves {"op":"logs","name":…,"follow":bool}: the upstream's
// stderr ring, with a time at each line and a mark at each start (the
// daemon's own log with name ""), then with follow what is written from
// then on, until the client leaves or the daemon drains.
func (d *Daemon) serveLogs(c *net.UnixConn, req control.Request) {
	var snapshot []byte
	var ch <-chan []byte
	var cancel func()
	if req.Name == "" {
		snapshot, ch, cancel = d.logs.snapshot(req.Follow)
	} else {
		ring, err := d.ups.Logs(req.Name)
		if err != nil {
			reply(c, control.Reply{Error: err.Error()})
			return
		}
		snapshot, ch, cancel = ring.Log(req.Follow)
	}
	if cancel != nil {
		defer cancel()
	}
	if !reply(c, control.Reply{OK: true}) || !reply(c, control.LogLine{Log: string(snapshot)}) || !req.Follow {
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
			if !ok || !reply(c, control.LogLine{Log: string(b)}) {
				return
			}
		case <-gone:
			return
		case <-d.draining.Done():
			return
		}
	}
}
