package sockdiag_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"github.com/snodod/snodod/internal/sockdiag"
	"github.com/snodod/snodod/internal/sockdiag/sockdiagtest"
)

// pair returns both ends of a new TCP connection to a listener on addr.
func pair(t testing.TB, network, addr string, dial func(string) (net.Conn, error)) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen %s %s: %v", network, addr, err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	target := ln.Addr().String()
	if network == "tcp" && addr == "[::]:0" { // dual stack, reached over IPv4
		target = net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	if dial == nil {
		dial = func(a string) (net.Conn, error) { return net.Dial("tcp", a) }
	}
	client, err = dial(target)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func addrPort(a net.Addr) netip.AddrPort { return a.(*net.TCPAddr).AddrPort() }

// peerOwner is what the daemon asks: who owns the other end of an
// accepted connection.
func peerOwner(server net.Conn) (int, error) {
	return sockdiag.Owner(addrPort(server.RemoteAddr()), addrPort(server.LocalAddr()))
}

// The owner of this process's own connections is this process's uid, over
// IPv4, IPv6 and a dual-stack listener reached over IPv4; both ends of a
// connection are found.
func TestOwnConnections(t *testing.T) {
	for _, tc := range []struct{ name, network, addr string }{
		{"ipv4", "tcp4", "127.0.0.1:0"},
		{"another loopback address", "tcp4", "127.0.0.2:0"},
		{"ipv6", "tcp6", "[::1]:0"},
		{"dual stack over ipv4", "tcp", "[::]:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t, tc.network, tc.addr, nil)
			if uid, err := peerOwner(server); err != nil || uid != os.Geteuid() {
				t.Errorf("the client's end: uid %d, %v; want %d", uid, err, os.Geteuid())
			}
			if uid, err := sockdiag.Owner(addrPort(server.LocalAddr()), addrPort(server.RemoteAddr())); err != nil || uid != os.Geteuid() {
				t.Errorf("the server's end: uid %d, %v; want %d", uid, err, os.Geteuid())
			}
			_ = client
		})
	}
}

// A connection from a socket of another uid is that uid's: the case the
// daemon refuses (run as root; elsewhere skipped).
func TestAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a socket of another uid needs root")
	}
	const nobody = 65534
	_, server := pair(t, "tcp4", "127.0.0.1:0", func(addr string) (net.Conn, error) { return sockdiagtest.DialAs(nobody, addr) })
	if uid, err := peerOwner(server); err != nil || uid != nobody {
		t.Errorf("uid %d, %v; want %d", uid, err, nobody)
	}
}

// A connection that no longer exists is ErrNotFound, and so is a
// four-tuple nobody uses.
func TestNotFound(t *testing.T) {
	client, server := pair(t, "tcp4", "127.0.0.1:0", nil)
	local, remote := addrPort(server.RemoteAddr()), addrPort(server.LocalAddr())
	client.Close()
	server.Close()
	// The client's end lingers in TIME_WAIT (the kernel's uid 0) or is
	// gone: neither has an owner.
	if uid, err := sockdiag.Owner(local, remote); !errors.Is(err, sockdiag.ErrNotFound) && !errors.Is(err, sockdiag.ErrClosed) {
		t.Errorf("a closed connection: uid %d, %v; want ErrClosed or ErrNotFound", uid, err)
	}
	if _, err := sockdiag.Owner(netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")); !errors.Is(err, sockdiag.ErrNotFound) {
		t.Errorf("an unused four-tuple: %v, want ErrNotFound", err)
	}
	if _, err := sockdiag.Owner(netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("[::1]:2")); err == nil {
		t.Error("addresses of two families were accepted")
	}
}

// A client that sends and closes at once leaves its end orphaned (the
// server has not closed its own): the uid of such a socket is not
// trusted, whatever the kernel says, since no process holds it.
func TestClosedByItsOwner(t *testing.T) {
	client, server := pair(t, "tcp4", "127.0.0.1:0", nil)
	if _, err := client.Write([]byte("POST / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	if uid, err := peerOwner(server); !errors.Is(err, sockdiag.ErrClosed) {
		t.Errorf("uid %d, %v; want ErrClosed", uid, err)
	}
}

// BenchmarkOwner is the cost the daemon pays once per accepted loopback
// HTTP connection.
func BenchmarkOwner(b *testing.B) {
	_, server := pair(b, "tcp4", "127.0.0.1:0", nil)
	local, remote := addrPort(server.RemoteAddr()), addrPort(server.LocalAddr())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sockdiag.Owner(local, remote); err != nil {
			b.Fatal(err)
		}
	}
}
