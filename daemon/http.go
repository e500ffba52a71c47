package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// The Streamable HTTP listener (docs/protocol.md §13): bound by Run before the
// daemon reports ready (a bad or busy http.listen fails the start, like the
// sockets), served by a suture service under the root supervisor (a
// failing server is restarted on the same listener), drained with the
// sessions on SIGTERM, shown in Status.

// httpListener is the daemon's HTTP listener and its handler.
type httpListener struct {
	d       *Daemon
	ln      net.Listener
	access  httpAccess // what ln is bound to: who its clients are (http_access.go)
	handler *mcphttp.Handler
	limits  mcphttp.ServerLimits
	grace   time.Duration

	stopped    chan struct{} // closed when Serve has drained, for good
	retire     chan struct{} // closed by retireHTTP: the drain is an upgrade's
	retireOnce sync.Once

	mu       sync.Mutex
	restarts int
	state    string
	token    suture.ServiceToken
}

// genViews resolves the views the HTTP endpoint serves: the aggregated
// view at http.path, an upstream passed through at http.path/NAME
// (docs/upstreams.md §2), each for the generation new sessions use, so a
// request after a reload is served by the reloaded catalog.
type genViews struct{ d *Daemon }

func (v genViews) View(name string) (server.Dispatcher, bool) {
	if name != "" && v.d.ups.Has(name) != nil {
		return nil, false
	}
	return httpView{d: v.d, name: name}, true
}

// httpView is one view as the HTTP handler sees it. A legacy session is
// opened as a daemon session of the view (OpenSession), so that what it
// holds on hosted upstreams (share = "session" instances, resource
// subscriptions) is its own and released when it ends. 2026 POSTs keep
// nothing between requests, so all of them are served as one long-lived
// session of the view (stateless): a share = "session" upstream has one
// instance for every 2026 HTTP client of this node. HTTP clients send no
// working directory: share = "cwd" and "session" upstreams start in the
// daemon's (docs/upstreams.md §3).
type httpView struct {
	d    *Daemon
	name string
}

var (
	_ mcphttp.SessionOpener = httpView{}
	_ mcphttp.ParamHeaders  = httpView{}
)

// open makes the view's dispatcher for one legacy HTTP session.
func (v httpView) open() (server.Dispatcher, func()) {
	g := v.d.gen.Load()
	disp, end, err := v.dispatcher(g)
	if err != nil {
		// The upstream was removed by a reload since the route was
		// resolved: the aggregated server answers as for an unknown name.
		return g.srv, func() {}
	}
	return disp, end
}

// dispatcher is the view's dispatcher for one new HTTP session of g, under
// an id of its own (what the session holds on upstreams is by id). HTTP
// clients send no working directory, and none is asked to log in to a
// remote server: an HTTP session is not one uid's (its requests may come
// over several connections, with a token).
func (v httpView) dispatcher(g *generation) (server.Dispatcher, func(), error) {
	return v.d.dispatcher(v.d.sessions.newID(), g, v.name, "", false)
}

// stateless is the session every 2026 POST of the view is served in,
// made for the generation's server and made again when a reload replaced
// that server (the one it replaces is ended).
func (v httpView) stateless() server.Dispatcher {
	d := v.d
	g := d.gen.Load()
	d.httpMu.Lock()
	defer d.httpMu.Unlock()
	if s, ok := d.http2026[v.name]; ok && s.srv == g.srv {
		return s.disp
	}
	if old, ok := d.http2026[v.name]; ok {
		defer old.end()
	}
	disp, end, err := v.dispatcher(g)
	if err != nil {
		return g.srv
	}
	if d.http2026 == nil {
		d.http2026 = map[string]statelessView{}
	}
	d.http2026[v.name] = statelessView{srv: g.srv, disp: disp, end: end}
	return disp
}

// statelessView is httpView.stateless's session of one view.
type statelessView struct {
	srv  *server.Server // the generation's server it was made for
	disp server.Dispatcher
	end  func()
}

// endStateless ends the 2026 sessions of every view, at shutdown.
func (d *Daemon) endStateless() {
	d.httpMu.Lock()
	defer d.httpMu.Unlock()
	for name, s := range d.http2026 {
		s.end()
		delete(d.http2026, name)
	}
}

func (v httpView) OpenSession() (server.Dispatcher, func()) { return v.open() }

func (v httpView) Initialize(ss *server.SessionState, params json.RawMessage) (any, string, *protocol.Error) {
	return v.stateless().Initialize(ss, params)
}

func (v httpView) Notify(ss *server.SessionState, method string, params json.RawMessage) {
	v.stateless().Notify(ss, method, params)
}

func (v httpView) Dispatch(ctx context.Context, req *server.Request) server.Outcome {
	return v.stateless().Dispatch(ctx, req)
}

func (v httpView) ToolParamHeaders(tool string) (map[string]string, bool) {
	if ph, ok := v.stateless().(mcphttp.ParamHeaders); ok {
		return ph.ToolParamHeaders(tool)
	}
	return nil, false
}

// startHTTP binds http.listen (a host-less :port binds 127.0.0.1; unix:PATH
// a Unix socket), judges the address bound (http_access.go) and adds its
// service to root. Without http.listen it does nothing.
//
// A listener passed by the daemon that started this one (an upgrade) is
// served instead of binding http.listen; without http.listen it is closed.
func (d *Daemon) startHTTP(root *suture.Supervisor, cfg *config.Config, passed net.Listener) error {
	hc := cfg.HTTP
	if hc.Listen == "" {
		if passed != nil {
			passed.Close()
		}
		return nil
	}
	var token string
	if hc.AuthTokenFile != "" {
		b, err := os.ReadFile(hc.AuthTokenFile)
		if err != nil {
			return fmt.Errorf("http.auth_token_file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return fmt.Errorf("http.auth_token_file %s is empty; write the bearer token clients will send into it", hc.AuthTokenFile)
		}
	}
	ln := passed
	if ln == nil {
		var err error
		if ln, err = bindHTTP(hc.Listen); err != nil {
			return err
		}
	}
	access, err := judgeHTTP(hc, ln.Addr(), token != "")
	if err != nil {
		ln.Close()
		return err
	}
	g := d.gen.Load()
	h, err := mcphttp.New(mcphttp.Options{
		Views:                   genViews{d},
		Dispatcher:              httpView{d: d},
		Executor:                g.exec,
		Versions:                cfg.Protocol.Versions,
		Path:                    hc.Path,
		MaxBodyBytes:            hc.MaxBodyBytes,
		ReadTimeout:             hc.ReadTimeout,
		WriteTimeout:            g.limits.WriteTimeout,
		AllowedOrigins:          hc.AllowedOrigins,
		AllowedHosts:            hc.AllowedHosts,
		AuthToken:               token,
		IdentifyPeer:            identifier(access),
		PeerAllowed:             d.httpPeerAllowed,
		AllowUnauthenticated:    hc.AllowUnauthenticated,
		MaxSubscriptions:        hc.MaxSubscriptions,
		MaxSessions:             hc.MaxSessions,
		MaxSessionsPerPeer:      hc.MaxSessionsPerPeer,
		SessionMaxSubscriptions: g.limits.MaxSubscriptions,
		SessionIdleTimeout:      hc.SessionIdleTimeout,
		NodeID:                  hc.NodeID,
		ShutdownGrace:           g.limits.ShutdownGrace,
		Logger:                  d.log.With("listener", "http"),
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("http listener: %w", err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		// Removed at the drain, whoever made it (a listener passed by an
		// upgrade does not remove it unless told so); left in place for
		// the next process of an upgrade (retire).
		ul.SetUnlinkOnClose(true)
	}
	l := &httpListener{d: d, ln: ln, access: access, handler: h, grace: g.limits.ShutdownGrace, state: "serving", stopped: make(chan struct{}),
		retire: make(chan struct{}), limits: mcphttp.ServerLimits{ReadHeaderTimeout: hc.ReadTimeout, MaxHeaderBytes: hc.MaxHeaderBytes, IdleTimeout: hc.IdleTimeout}}
	d.http = l
	l.token = root.Add(l)
	d.log.Info("listening", "socket", "http", "address", ln.Addr().String(), "access", access, "path", h.Path(), "node_id", hc.NodeID)
	return nil
}

func (l *httpListener) String() string { return "http listener " + l.ln.Addr().String() }

// Serve serves HTTP on the listener until ctx ends; then it drains: see
// drainHTTP. A server that fails is restarted by the supervisor on the
// same listener.
func (l *httpListener) Serve(ctx context.Context) error {
	srv := mcphttp.NewServer(l.handler, l.limits, l.d.log)
	failed := make(chan error, 1)
	go func() { failed <- srv.Serve(keepOpen{l.ln}) }()
	l.setState("serving")
	select {
	case err := <-failed:
		l.mu.Lock()
		l.restarts++
		l.state = "restarting"
		l.mu.Unlock()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	l.setState("draining")
	defer close(l.stopped)
	retiring := false
	select {
	case <-l.retire:
		retiring = true
		if ul, ok := l.ln.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false) // the new process serves that path
		}
	default:
	}
	_ = l.ln.Close() // the accept loop ends; nothing restarts it now
	drainCtx, cancel := context.WithTimeout(context.Background(), l.grace+drainMargin)
	defer cancel()
	if retiring {
		l.handler.Retire()
		l.awaitConnections(l.grace)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.handler.Shutdown(drainCtx)
	}()
	if err := srv.Shutdown(drainCtx); err != nil {
		srv.Close()
	}
	<-done
	<-failed
	return nil
}

// awaitConnections waits, at most bound, until every connection has
// closed: after an upgrade each one is closed by the server right after
// its next answer (Connection: close), or by its client. Closing an idle
// keep-alive connection instead would race with a client sending its
// next request on it, which then fails (docs/protocol.md §13.7); only a
// connection idle for the whole bound is closed so, by Shutdown.
func (l *httpListener) awaitConnections(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for l.handler.Stats().Connections > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// retireHTTP marks the HTTP listener's coming drain as an upgrade's: the
// new process serves the listener, so this one finishes every request it
// has read and closes each connection after its next answer (see
// awaitConnections) instead of refusing new requests with 503.
func (d *Daemon) retireHTTP() {
	if l := d.http; l != nil {
		l.retireOnce.Do(func() { close(l.retire) })
	}
}

func (l *httpListener) setState(s string) {
	l.mu.Lock()
	l.state = s
	l.mu.Unlock()
}

// keepOpen is the listener as one http.Server sees it: Close is a no-op,
// so a server restarted by the supervisor serves the same socket. Serve
// closes the real one when its drain begins.
type keepOpen struct{ net.Listener }

func (keepOpen) Close() error { return nil }

// drainHTTP starts stopping the HTTP listener: no new connections,
// listen streams end, requests finish within daemon.shutdown_grace,
// sessions end. The channel is closed once the service has stopped.
func (d *Daemon) drainHTTP(root *suture.Supervisor) <-chan struct{} {
	done := make(chan struct{})
	l := d.http
	if l == nil {
		close(done)
		return done
	}
	l.setState("draining")
	_ = root.Remove(l.token) // cancels Serve's context; so does the root's end
	go func() {
		defer close(done)
		select {
		case <-l.stopped:
		case <-time.After(l.grace + 2*drainMargin):
			d.log.Warn("the HTTP listener did not stop in time", "bound", l.grace+2*drainMargin)
		}
	}()
	return done
}

// httpStatus is the HTTP listener's status, nil without one.
func (d *Daemon) httpStatus() *control.HTTP {
	l := d.http
	if l == nil {
		return nil
	}
	st := l.handler.Stats()
	cfg := d.Config().HTTP
	l.mu.Lock()
	defer l.mu.Unlock()
	return &control.HTTP{
		Listen: l.ln.Addr().String(), Access: string(l.access), Path: l.handler.Path(), State: l.state, Restarts: l.restarts,
		NodeID: cfg.NodeID, Sessions: st.Sessions, MaxSessions: cfg.MaxSessions, MaxSessionsPerPeer: cfg.MaxSessionsPerPeer,
		Streams: st.Streams, Listens: st.Listens, Requests2026: st.Modern, RequestsLegacy: st.Legacy, Refused: st.Refused,
	}
}

// httpSettings is cfg's http section as one line, for the reload's
// warning that it applies only after a restart.
func httpSettings(cfg *config.Config) string { return fmt.Sprintf("%+v", cfg.HTTP) }
