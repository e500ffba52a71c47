// Package sockdiag finds the user that owns a TCP socket of this machine,
// given the socket's two addresses: what `ss -tne` prints as uid. The
// daemon uses it to tell which local user is at the other end of a
// loopback HTTP connection (docs/security.md), where SO_PEERCRED, which
// answers that for a Unix socket, does not apply.
//
// It is Linux-only (NETLINK_SOCK_DIAG); elsewhere Owner fails with
// ErrUnsupported, and a caller must treat the peer as unknown.
package sockdiag

import (
	"errors"
	"net/netip"
)

// ErrNotFound is returned when no TCP socket has the two addresses: the
// connection was closed meanwhile, or its other end is not on this
// machine (in this network namespace).
var ErrNotFound = errors.New("no TCP socket with these addresses")

// ErrClosed is returned for a socket that no process holds any more: its
// owner closed it (the kernel then reports uid 0, which must not be
// mistaken for root's).
var ErrClosed = errors.New("the TCP socket was closed by its owner")

// ErrUnsupported is returned where the kernel interface does not exist.
var ErrUnsupported = errors.New("finding a TCP socket's owner is implemented on Linux only")

// Owner returns the uid that owns the TCP socket whose own address is
// local and whose peer's is remote: to find who is at the other end of an
// accepted connection, pass that connection's remote address as local and
// its local address as remote. IPv4 addresses may be given 4in6.
//
// The uid is the one the socket was created with (the creator's fsuid),
// whichever process holds the socket now: a socket passed to another
// process, or kept across setuid(2), keeps its creator's. A socket its
// owner has closed is ErrClosed. It is safe for concurrent use; each call
// costs one netlink round trip (BenchmarkOwner: about 9 µs).
func Owner(local, remote netip.AddrPort) (uid int, err error) {
	return owner(local, remote)
}
