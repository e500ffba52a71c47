package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
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

	bearer string // http.auth_token_file's token, which opens every view too

	mu       sync.Mutex
	restarts int
	state    string
	token    suture.ServiceToken
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
		Views:                   genRoutes{d}, // views.go
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
	l := &httpListener{d: d, ln: ln, access: access, bearer: token, handler: h, grace: g.limits.ShutdownGrace, state: "serving", stopped: make(chan struct{}),
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
		Statuses: st.Statuses,
	}
}

// httpSettings is cfg's http section as one line, for the reload's
// warning that it applies only after a restart.
func httpSettings(cfg *config.Config) string { return fmt.Sprintf("%+v", cfg.HTTP) }
