package sockdiag

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The kernel interface (linux/sock_diag.h, linux/inet_diag.h; sock_diag(7)):
// a SOCK_DIAG_BY_FAMILY request on a NETLINK_SOCK_DIAG socket carries a
// struct inet_diag_req_v2 naming one socket by its four-tuple. Without
// NLM_F_DUMP the kernel looks that one socket up in the TCP hash tables
// (inet_diag_find_one_icsk, the lookup an incoming packet gets) instead of
// walking every socket, and answers with one struct inet_diag_msg, whose
// idiag_uid is the owner, or with an NLMSG_ERROR (ENOENT: no such socket).
// Neither needs a privilege. x/sys/unix has the constants but not these
// structs, so they are laid out by hand below; every field is host order
// except the ports and addresses, which are network order.
const (
	reqLen    = unix.SizeofNlMsghdr + 8 + sockIDLen // nlmsghdr + inet_diag_req_v2
	sockIDLen = 48                                  // struct inet_diag_sockid
	// msgUIDOffset is idiag_uid's offset in struct inet_diag_msg: four
	// bytes of family, state, timer and retrans, the sockid, then
	// idiag_expires, idiag_rqueue and idiag_wqueue.
	msgUIDOffset = 4 + sockIDLen + 12
	msgLen       = msgUIDOffset + 8 // ... idiag_uid, idiag_inode
	allStates    = 0xffffffff
	noCookie     = 0xffffffff // INET_DIAG_NOCOOKIE, both halves
)

func owner(local, remote netip.AddrPort) (int, error) {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	if la.Is4() != ra.Is4() || !la.IsValid() || !ra.IsValid() {
		return 0, fmt.Errorf("sock_diag: addresses %s and %s are not of one family", local, remote)
	}
	family := byte(unix.AF_INET6)
	if la.Is4() {
		// An IPv4 lookup also finds a dual-stack IPv6 socket that
		// speaks IPv4: the kernel keeps both in one table.
		family = unix.AF_INET
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	// The kernel answers at once; a bound keeps a lost answer from
	// holding a connection's first request for ever.
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	req := request(family, la, local.Port(), ra, remote.Port())
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: send: %w", err)
	}
	buf := make([]byte, 1024)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sock_diag: receive: %w", err)
		}
		return parse(buf[:n])
	}
}

// request is the netlink message asking for the one TCP socket with these
// addresses.
func request(family byte, la netip.Addr, lport uint16, ra netip.Addr, rport uint16) []byte {
	b := make([]byte, reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], reqLen)
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], 1) // sequence number; the socket is ours alone
	r := b[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP // sdiag_family, sdiag_protocol
	ne.PutUint32(r[4:], allStates)        // idiag_states
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], lport) // idiag_sport
	binary.BigEndian.PutUint16(id[2:], rport) // idiag_dport
	putAddr(id[4:20], la)                     // idiag_src
	putAddr(id[20:36], ra)                    // idiag_dst
	// idiag_if 0: any interface.
	ne.PutUint32(id[40:], noCookie)
	ne.PutUint32(id[44:], noCookie)
	return b
}

// putAddr writes a in network order: an IPv4 address in the first four
// bytes, as the kernel reads it.
func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
		return
	}
	v := a.As16()
	copy(dst, v[:])
}

// parse reads the kernel's answer: the socket's uid, or its error.
func parse(b []byte) (int, error) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		n := int(ne.Uint32(b[0:]))
		typ := ne.Uint16(b[4:])
		if n < unix.SizeofNlMsghdr || n > len(b) {
			return 0, fmt.Errorf("sock_diag: a truncated answer (%d of %d bytes)", len(b), n)
		}
		body := b[unix.SizeofNlMsghdr:n]
		switch typ {
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return 0, fmt.Errorf("sock_diag: a truncated error")
			}
			errno := unix.Errno(-int32(ne.Uint32(body)))
			if errno == unix.ENOENT {
				return 0, ErrNotFound
			}
			return 0, fmt.Errorf("sock_diag: %w", errno)
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(body) < msgLen {
				return 0, fmt.Errorf("sock_diag: a truncated inet_diag_msg (%d bytes)", len(body))
			}
			// A socket no process holds any more has no inode: one its
			// owner closed (orphaned, draining its last bytes) or a
			// TIME_WAIT entry, for which the kernel reports uid 0. Its
			// uid says nothing about who sent what is still unread.
			if ne.Uint32(body[msgUIDOffset+4:]) == 0 {
				return 0, ErrClosed
			}
			return int(ne.Uint32(body[msgUIDOffset:])), nil
		case unix.NLMSG_DONE:
			return 0, ErrNotFound
		}
		b = b[min(len(b), (n+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
	}
	return 0, fmt.Errorf("sock_diag: an answer without a socket or an error")
}
