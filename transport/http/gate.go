package http

import (
	"context"
	"net"
	nethttp "net/http"
	"time"

	"github.com/snodod/snodod/protocol"
)

// GateOptions are the access rules of a listener other than the MCP
// endpoint (the daemon's admin listener): the same Host, Origin, peer and
// token rules as Options' (docs/protocol.md §13.1), with the same meaning.
type GateOptions struct {
	AllowedHosts         []string
	AllowedOrigins       []string
	AuthToken            string
	IdentifyPeer         func(net.Conn) Peer
	PeerAllowed          func(uid int) bool
	AllowUnauthenticated bool
	// WriteTimeout bounds the write of a refusal (default 10 s).
	WriteTimeout time.Duration
}

// Gate serves another handler behind the checks the MCP endpoint applies
// to every request before its body is read, so that a second listener of
// the daemon admits exactly whom the HTTP listener would. A refusal is
// the endpoint's (403 or 401 with its challenge, a JSON-RPC error body),
// counted in Refused by reason. Its methods may be called concurrently.
type Gate struct {
	opts    Options
	guard   *guard
	next    nethttp.Handler
	refused refusals
}

// NewGate returns next behind o's checks. Serve it from a server built by
// NewServer (or with ConnContext set to the Gate's) for o.IdentifyPeer to
// be used.
func NewGate(o GateOptions, next nethttp.Handler) *Gate {
	g := &Gate{next: next, opts: Options{
		AllowedHosts: o.AllowedHosts, AllowedOrigins: o.AllowedOrigins, AuthToken: o.AuthToken,
		IdentifyPeer: o.IdentifyPeer, PeerAllowed: o.PeerAllowed, AllowUnauthenticated: o.AllowUnauthenticated,
	}}
	if o.WriteTimeout <= 0 {
		g.opts.WriteTimeout = 10 * time.Second
	} else {
		g.opts.WriteTimeout = o.WriteTimeout
	}
	g.guard = newGuard(&g.opts)
	return g
}

func (g *Gate) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	if ref := g.guard.check(r, func() Peer { return identify(r, g.opts.IdentifyPeer) }); ref != nil {
		g.refused.add(ref.reason)
		if ref.challenge != "" {
			w.Header().Set("WWW-Authenticate", ref.challenge)
		}
		refuse(w, ref.status, protocol.ID{}, ref.err, g.opts.WriteTimeout)
		return
	}
	g.next.ServeHTTP(w, r)
}

// ConnContext is the http.Server hook that lets the Gate identify each
// connection's peer once (as Handler.ConnContext).
func (g *Gate) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if g.opts.IdentifyPeer == nil {
		return ctx
	}
	return context.WithValue(ctx, connPeerKey{}, &connPeer{conn: c})
}

// Refused counts the requests refused so far, by reason ("host",
// "origin", "unauthorized", "peer"). The map is the caller's.
func (g *Gate) Refused() map[string]uint64 { return g.refused.snapshot() }
