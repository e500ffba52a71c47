package daemon

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/session"
)

// peerCred returns the process id and uid of the peer of c.
//
// SO_PEERCRED reports the credentials the peer had when it called
// connect(2) (or socketpair(2)), not its current ones: a process that
// connects and then drops privileges, or passes the socket to another
// process, is still judged by the credentials it connected with. That is
// what we want for an access check, made once per connection. The pid is
// informational (status): it may belong to a process that has since exited.
func peerCred(c *net.UnixConn) (session.Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return session.Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return session.Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return session.Peer{}, fmt.Errorf("peer credentials (SO_PEERCRED): %w", credErr)
	}
	return session.Peer{PID: int(cred.Pid), UID: int(cred.Uid)}, nil
}
