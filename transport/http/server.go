package http

import (
	"log/slog"
	"net"
	nethttp "net/http"
	"time"
)

// ServerLimits are the connection-level limits of the http.Server that
// NewServer builds. Zero means the default.
type ServerLimits struct {
	// ReadHeaderTimeout bounds the reading of a request's headers
	// (default 10 s): a client that trickles them is cut off.
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB); more is
	// answered 431.
	MaxHeaderBytes int
	// IdleTimeout closes a keep-alive connection idle this long between
	// requests (default 2 min).
	IdleTimeout time.Duration
}

// Defaults of ServerLimits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultIdleTimeout       = 2 * time.Minute
)

// NewServer returns an http.Server serving h with l's limits; for a
// *Handler it also sets ConnContext (Options.IdentifyPeer) and ConnState
// (Stats.Connections), for a *Gate its ConnContext. It sets no
// WriteTimeout and no ReadTimeout: the handler bounds each write and each
// body itself, so that streams live as long as they are written to.
func NewServer(h nethttp.Handler, l ServerLimits, log *slog.Logger) *nethttp.Server {
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	srv := &nethttp.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if mh, ok := h.(*Handler); ok {
		srv.ConnContext = mh.ConnContext
		srv.ConnState = mh.connState
	}
	if g, ok := h.(*Gate); ok {
		srv.ConnContext = g.ConnContext
	}
	return srv
}

// connState counts the server's open connections (Stats.Connections),
// which an upgrade waits for (Handler.Retire).
func (h *Handler) connState(_ net.Conn, state nethttp.ConnState) {
	switch state {
	case nethttp.StateNew:
		h.conns.Add(1)
	case nethttp.StateClosed, nethttp.StateHijacked:
		h.conns.Add(-1)
	}
}
