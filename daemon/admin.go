package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/statuspage"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/metrics"
	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// The admin listener (docs/observability.md, "The admin listener"):
// admin.listen, a loopback address or a Unix socket, serving /metrics and
// nothing of MCP. Its peers are judged as the HTTP listener's are
// (http_access.go): a Unix socket's by SO_PEERCRED, a loopback
// connection's by the kernel's socket table, the daemon's own uid and
// daemon.allowed_uids served, anyone else only with the bearer token of
// admin.auth_token_file. It is bound after the HTTP listener (a busy or
// bad address fails the start), closed when the drain begins, and not
// handed over by an upgrade: the new process binds it again once this
// one has let it go.

// adminListener is the admin listener while it serves.
type adminListener struct {
	ln     net.Listener
	access httpAccess
	srv    *http.Server
	page   *statuspage.Page
	logins pageLogins // the page's logins under way
	once   sync.Once
	done   chan struct{} // closed when Serve has returned
}

// adminRetry bounds how long a daemon started by an upgrade tries to bind
// an admin.listen its predecessor still holds, and how often.
const (
	adminRetryFor   = time.Minute
	adminRetryEvery = 50 * time.Millisecond
)

// newMetrics makes the daemon's metrics when cfg has an admin listener to
// serve them, nil otherwise: without it no runtime is observed and a
// request costs nothing more.
func (d *Daemon) newMetrics(cfg *config.Config) {
	if cfg.Admin.Listen == "" {
		return
	}
	d.metrics = metrics.New(metrics.Options{
		ClassicOnly:  !cfg.Admin.NativeHistograms,
		Status:       d.Status,
		Limits:       func() limits.Limits { return d.gen.Load().limits },
		AuditDropped: d.audit.Dropped,
		AdminRefused: func() map[string]uint64 {
			if a := d.adminGate.Load(); a != nil {
				return a.Refused()
			}
			return nil
		},
	})
}

// observer is the Observer the daemon's runtimes report to: the audit
// log's sink (audit.go), which a reload may turn on, the metrics when
// there are any, and the tracer when traces are on.
func (d *Daemon) observer() server.Observer {
	if d.metrics == nil {
		return d.withTracing(&d.audit)
	}
	return d.withTracing(metricsAndAudit{d.metrics, &d.audit})
}

// metricsAndAudit tells the metrics, then the audit log's sink.
type metricsAndAudit struct {
	m *metrics.Metrics
	a *auditSink
}

func (o metricsAndAudit) RequestEnded(e server.RequestEnd) {
	o.m.RequestEnded(e)
	o.a.RequestEnded(e)
}

// startAdmin binds admin.listen and serves it on a goroutine of its own;
// without admin.listen it does nothing. A daemon started by an upgrade
// whose predecessor still holds the address binds it in the background,
// as soon as the predecessor's drain lets it go.
func (d *Daemon) startAdmin(cfg *config.Config) error {
	ac := cfg.Admin
	if ac.Listen == "" || d.metrics == nil {
		return nil
	}
	token, err := readToken("admin.auth_token_file", ac.AuthTokenFile)
	if err != nil {
		return err
	}
	ln, err := bindAdmin(ac.Listen)
	_, upgraded := d.origin.(*takeover)
	if err != nil && upgraded && adminBusy(err) {
		d.log.Info("the admin listener's address is still the previous process's; binding it once that one lets it go", "address", ac.Listen)
		go func() {
			deadline := time.Now().Add(adminRetryFor)
			for d.draining.Err() == nil {
				ln, err := bindAdmin(ac.Listen)
				if err == nil {
					if err = d.serveAdmin(ac.Listen, ln, token); err == nil {
						return
					}
				}
				if !adminBusy(err) || time.Now().After(deadline) {
					d.log.Error("admin listener", "err", err)
					return
				}
				time.Sleep(adminRetryEvery)
			}
		}()
		return nil
	}
	if err != nil {
		return err
	}
	return d.serveAdmin(ac.Listen, ln, token)
}

// serveAdmin judges what ln is bound to and serves it, with the peer
// rules of the HTTP listener for that kind of address.
func (d *Daemon) serveAdmin(listen string, ln net.Listener, token string) error {
	access, err := judgeAdmin(listen, ln.Addr())
	if err != nil {
		ln.Close()
		return err
	}
	l := &adminListener{ln: ln, access: access, done: make(chan struct{})}
	l.page = d.newPage(d.Config().Admin, token, access, &l.logins)
	gate := mcphttp.NewGate(mcphttp.GateOptions{AuthToken: token, IdentifyPeer: identifier(access), PeerAllowed: d.httpPeerAllowed}, d.adminMux(l.page))
	// The page's cookie stands for the token in front of the gate, so the
	// server's ConnContext is the gate's own.
	l.srv = mcphttp.NewServer(l.page.Credentials(gate), mcphttp.ServerLimits{}, d.log)
	l.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(gate.ConnContext(ctx, c), adminConnKey{}, c)
	}
	d.adminMu.Lock()
	if d.draining.Err() != nil {
		d.adminMu.Unlock()
		l.page.Close()
		ln.Close()
		return nil
	}
	d.admin = l
	d.adminMu.Unlock()
	d.adminGate.Store(gate)
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("admin listener failed", "err", err)
		}
	}()
	d.log.Info("listening", "socket", "admin", "address", ln.Addr().String(), "access", access)
	return nil
}

// adminMux routes the admin listener's paths: /metrics, and the status
// page's (statuspage.Page.Register).
func (d *Daemon) adminMux(page *statuspage.Page) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metrics.Handler())
	page.Register(mux)
	return mux
}

// stopAdmin closes the admin listener and waits, briefly, for its
// scrapes to finish. It may be called more than once.
func (d *Daemon) stopAdmin() {
	d.adminMu.Lock()
	l := d.admin
	d.adminMu.Unlock()
	if l == nil {
		return
	}
	l.once.Do(func() {
		l.page.Close() // its streams end, or Shutdown would wait for them
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := l.srv.Shutdown(ctx); err != nil {
			l.srv.Close()
		}
		<-l.done
		l.logins.close()
	})
}

// adminAddr is the address the admin listener is bound to, "" without
// one (tests).
func (d *Daemon) adminAddr() string {
	d.adminMu.Lock()
	defer d.adminMu.Unlock()
	if d.admin == nil {
		return ""
	}
	return d.admin.ln.Addr().String()
}

// bindAdmin binds admin.listen: a Unix socket made as the session socket
// is, or a TCP address, a host-less :port on 127.0.0.1.
func bindAdmin(listen string) (net.Listener, error) {
	if path, ok := config.UnixListen(listen); ok {
		l, err := listenUnix("admin", path, "admin.listen", false)
		if err != nil {
			return nil, err
		}
		return l.ln, nil
	}
	addr := listen
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin.listen %s: %w; choose another address or stop what listens there", listen, err)
	}
	return ln, nil
}

// adminBusy reports whether bindAdmin failed because something listens
// on the address already.
func adminBusy(err error) bool {
	var running *AlreadyRunningError
	return errors.Is(err, syscall.EADDRINUSE) || errors.As(err, &running)
}

// judgeAdmin refuses an address that is not loopback: config refuses
// such an admin.listen, and a name ("localhost") may resolve elsewhere.
func judgeAdmin(listen string, bound net.Addr) (httpAccess, error) {
	switch a := bound.(type) {
	case *net.UnixAddr:
		return accessUnix, nil
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsLoopback() {
			return accessLoopback, nil
		}
		return "", fmt.Errorf("admin.listen %s bound %s, which is not a loopback address (the name resolves there); name a loopback address, such as 127.0.0.1:%d", listen, a, a.Port)
	}
	return "", fmt.Errorf("admin.listen %s bound a %T", listen, bound)
}

// readToken reads a bearer token file (empty path: no token).
func readToken(key, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s %s is empty; write the bearer token clients will send into it", key, path)
	}
	return token, nil
}
