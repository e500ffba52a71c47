package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/sockdiag"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// Who may use the HTTP listener (docs/security.md, "Who can reach each
// listener"). The answer depends on the address actually bound, not on
// the name http.listen gives ("localhost" binds wherever the resolver
// says):
//
//   - a Unix socket (http.listen = "unix:PATH", mode 0600): the peer's uid
//     by SO_PEERCRED, as on the session socket;
//   - a loopback address: the uid that owns the other end of each
//     connection, from the kernel's socket table (internal/sockdiag);
//   - any other address: nobody is identified; the bearer token decides.
//
// An identified uid that the session socket would serve (the daemon's
// own, daemon.allowed_uids) needs no token; any other local user needs the
// token, or http.allow_unauthenticated.

// httpAccess is the kind of address the HTTP listener is bound to.
type httpAccess string

const (
	accessUnix     httpAccess = "unix"
	accessLoopback httpAccess = "loopback"
	accessNetwork  httpAccess = "network"
)

// bindHTTP binds http.listen: a Unix socket made as the session socket is
// (a private directory, mode 0600, a stale file replaced), or a TCP
// address, a host-less :port on 127.0.0.1.
func bindHTTP(listen string) (net.Listener, error) {
	if path, ok := config.UnixListen(listen); ok {
		l, err := listenUnix("http", path, "http.listen", false)
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
		return nil, fmt.Errorf("http.listen %s: %w; choose another address or stop what listens there", listen, err)
	}
	return ln, nil
}

// judgeHTTP returns the kind of address bound, or the refusal of a
// non-loopback one that nothing protects: http.listen named it by a name
// that config judged loopback, and the resolver said otherwise.
func judgeHTTP(hc config.HTTP, bound net.Addr, token bool) (httpAccess, error) {
	switch a := bound.(type) {
	case *net.UnixAddr:
		return accessUnix, nil
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsLoopback() {
			return accessLoopback, nil
		}
		if !token && !hc.AllowUnauthenticated {
			return "", fmt.Errorf("http.listen %s bound %s, which is not a loopback address (the name resolves there): "+
				"a listener there needs http.auth_token_file, or http.allow_unauthenticated = true behind something that authenticates; "+
				"or name a loopback address, such as 127.0.0.1:%d", hc.Listen, a, a.Port)
		}
	}
	return accessNetwork, nil
}

// identifier returns how the listener's peers are identified: nil on a
// network address.
func identifier(access httpAccess) func(net.Conn) mcphttp.Peer {
	switch access {
	case accessUnix:
		return identifyUnixPeer
	case accessLoopback:
		return identifyLoopbackPeer
	}
	return nil
}

func identifyUnixPeer(c net.Conn) mcphttp.Peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return mcphttp.Peer{Local: true, Err: fmt.Errorf("a %T is not a Unix socket", c)}
	}
	p, err := peerCred(uc)
	return mcphttp.Peer{Local: true, UID: p.UID, Err: err}
}

// identifyLoopbackPeer asks the kernel who owns the other end: the socket
// whose own address is this connection's remote one.
func identifyLoopbackPeer(c net.Conn) mcphttp.Peer {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return mcphttp.Peer{Local: true, Err: fmt.Errorf("a %T is not a TCP connection", c)}
	}
	uid, err := sockdiag.Owner(remote.AddrPort(), local.AddrPort())
	switch {
	case errors.Is(err, sockdiag.ErrNotFound):
		err = fmt.Errorf("no local socket is the other end of %s", remote)
	case errors.Is(err, sockdiag.ErrClosed):
		err = errors.New("the other end was closed")
	}
	return mcphttp.Peer{Local: true, UID: uid, Err: err}
}

// httpPeerAllowed is the uid rule of the session socket, with the
// configuration in force (daemon.allowed_uids is reloaded).
func (d *Daemon) httpPeerAllowed(uid int) bool {
	return uidAllowed(uid, d.uid, d.gen.Load().cfg.Daemon.AllowedUIDs)
}
