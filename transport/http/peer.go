package http

import (
	"context"
	"net"
	nethttp "net/http"
	"strconv"
	"sync"
)

// Who is at the other end of a connection (docs/security.md): the daemon
// identifies the local user behind a loopback TCP connection (the kernel's
// socket table) or a Unix socket (SO_PEERCRED), and serves an allowed uid
// without a token. The handler asks once per connection, at its first
// request: a lookup costs a system call or two, and the answer cannot
// change while the connection lives.

// Peer is the other end of one connection, as Options.IdentifyPeer found
// it.
type Peer struct {
	// Local is true for a connection from this machine whose user was
	// looked up (UID, or Err when the lookup failed). A connection that
	// is not Local is judged by the bearer token alone.
	Local bool
	UID   int
	// Err says why the user could not be found; such a peer is nobody's:
	// it needs the token (or http.allow_unauthenticated).
	Err error
}

// known reports whether the peer's uid was found.
func (p Peer) known() bool { return p.Local && p.Err == nil }

// connPeer is what ConnContext puts in a connection's context: the
// connection, and its Peer once looked up.
type connPeer struct {
	conn net.Conn
	once sync.Once
	peer Peer
}

type connPeerKey struct{}

// ConnContext is the http.Server hook NewServer installs: it gives each
// connection's context what the handler needs to identify its peer. A
// server built otherwise must set it (ConnContext: h.ConnContext) for
// Options.IdentifyPeer to be used.
func (h *Handler) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if h.o.IdentifyPeer == nil {
		return ctx
	}
	return context.WithValue(ctx, connPeerKey{}, &connPeer{conn: c})
}

// peer returns the Peer of r's connection: looked up at the connection's
// first request, and remembered for the next ones. Without IdentifyPeer
// (or without ConnContext) every peer is remote: the token decides.
func (h *Handler) peer(r *nethttp.Request) Peer { return identify(r, h.o.IdentifyPeer) }

// identify returns the Peer of r's connection, looked up with f at the
// connection's first request (Handler's and Gate's).
func identify(r *nethttp.Request, f func(net.Conn) Peer) Peer {
	cp, _ := r.Context().Value(connPeerKey{}).(*connPeer)
	if cp == nil || f == nil {
		return Peer{}
	}
	cp.once.Do(func() { cp.peer = f(cp.conn) })
	return cp.peer
}

// peerKey names the peer for the per-peer session count: a local user by
// uid (whatever address or socket it comes from), anyone else by address.
func (h *Handler) peerKey(r *nethttp.Request) string {
	if p := h.peer(r); p.known() {
		return "uid " + strconv.Itoa(p.UID)
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
