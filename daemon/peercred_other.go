//go:build !linux

package daemon

import (
	"errors"
	"net"

	"github.com/snodod/snodod/session"
)

// peerCred is implemented on Linux only (SO_PEERCRED). Elsewhere every
// connection is refused: without the peer's uid, daemon.allowed_uids cannot
// be enforced, and accepting everyone would be worse than accepting no one.
func peerCred(*net.UnixConn) (session.Peer, error) {
	return session.Peer{}, errors.New("peer credentials are implemented on Linux only")
}
