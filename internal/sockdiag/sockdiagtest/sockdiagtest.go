// Package sockdiagtest makes TCP connections that the kernel records as
// another user's, for tests of what the daemon does with a loopback peer
// it identifies (internal/sockdiag). It needs root.
package sockdiagtest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// DialAs connects to the IPv4 address addr ("127.0.0.1:8080") from a
// socket created with fsuid uid: the kernel records the creator's fsuid as
// the socket's owner, as for a process of that user. The fsuid is set on a
// thread of its own, which is thrown away afterwards, so the rest of the
// process keeps its credentials. It needs CAP_SETUID (root).
func DialAs(uid int, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Unmap().Is4() {
		return nil, fmt.Errorf("sockdiagtest: %q is not an IPv4 address and port", addr)
	}
	var fd int
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		unix.Setfsuid(uid)
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	}()
	<-done
	if err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "sockdiagtest")
	defer f.Close()
	return net.FileConn(f)
}
