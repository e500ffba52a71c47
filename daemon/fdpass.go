package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/session"
)

// Descriptor passing (SCM_RIGHTS) on the control socket.
//
// A client sends its request line and the descriptors in one sendmsg(2):
// the descriptors ride on the first byte of the line. On a stream socket
// the kernel never merges the bytes of two sendmsg calls that carry control
// data into one recvmsg, so the recvmsg that returns the line's first
// bytes returns the descriptors with them. The daemon therefore reads the
// request with recvmsg itself, never through a buffered reader that would
// read past the control data and drop it.

const (
	// maxRequestBytes bounds one control request line.
	maxRequestBytes = 64 << 10
	// maxPassedFDs bounds the descriptors accepted with one request. The
	// control buffer has room for this many; when a client sends more, the
	// kernel closes the ones that do not fit and sets MSG_CTRUNC, so
	// nothing leaks and the request is refused.
	maxPassedFDs = 4
)

// readRequest reads one request line (without its newline) from c, and
// the descriptors sent with it, as files the caller owns. Go's ReadMsgUnix
// asks for MSG_CMSG_CLOEXEC on Linux, so received descriptors are never
// inherited by a process the daemon starts.
func readRequest(c *net.UnixConn, deadline time.Time) (line []byte, files []*os.File, err error) {
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil, nil, err
	}
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 0, 512)
	oob := make([]byte, unix.CmsgSpace(maxPassedFDs*4))
	fail := func(err error) ([]byte, []*os.File, error) {
		closeFiles(files)
		return nil, nil, err
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, oobn, flags, _, err := c.ReadMsgUnix(buf[len(buf):cap(buf)], oob)
		got, perr := parseRights(oob[:oobn])
		files = append(files, got...)
		buf = buf[:len(buf)+n]
		switch {
		case perr != nil:
			return fail(perr)
		case flags&unix.MSG_CTRUNC != 0 && len(got) < maxPassedFDs:
			// The control buffer had room: the kernel could not install
			// the descriptors in this process (EMFILE, ENFILE) and
			// dropped them.
			return fail(errPassedFDsLost)
		case flags&unix.MSG_CTRUNC != 0:
			return fail(fmt.Errorf("more than %d descriptors sent with a request", maxPassedFDs))
		}
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			if i != len(buf)-1 {
				return fail(errors.New("bytes after the request line; send one request per connection"))
			}
			return buf[:i], files, nil
		}
		if err == nil && n == 0 && oobn == 0 {
			err = io.EOF // ReadMsgUnix reports end of stream as an empty read
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("connection closed before a whole request line")
			}
			return fail(err)
		}
		if len(buf) > maxRequestBytes {
			return fail(fmt.Errorf("request line longer than %d bytes", maxRequestBytes))
		}
	}
}

// parseRights returns the descriptors of the SCM_RIGHTS messages in oob as
// files. Every descriptor received is wrapped, also when an error follows,
// so that closing the files closes them all.
func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var files []*os.File
	var errs []error
	for i := range msgs {
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("control message: %w", err))
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("passed fd %d", fd)))
		}
	}
	return files, errors.Join(errs...)
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// rawFDs returns the descriptors of files, to attach to a message
// (SCM_RIGHTS). They are valid while files are open: the caller keeps
// files alive (runtime.KeepAlive) until the message is sent.
func rawFDs(files []*os.File) ([]int, error) {
	fds := make([]int, 0, len(files))
	for _, f := range files {
		if err := session.Control(f, func(fd int) error { fds = append(fds, fd); return nil }); err != nil {
			return nil, fmt.Errorf("descriptor %s: %w", f.Name(), err)
		}
	}
	return fds, nil
}

// sendRequest writes line to c with the descriptors fds attached to its
// first byte: a request line (which ends in "\n") on the control socket,
// or a frame of the upgrade wire (upgrade_wire.go).
func sendRequest(c *net.UnixConn, line []byte, fds ...int) error {
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(line, rights, nil)
	if err != nil {
		return err
	}
	if n < len(line) { // the descriptors went with the first part
		_, err = c.Write(line[n:])
	}
	return err
}

// sameFile reports whether in and out are one read-write file: a terminal
// or a socket a client passed as both its standard input and output. The
// session then uses one file for both directions (a session.Device takes
// the same file twice for a socket or a tty) and the other descriptor is
// closed. The two ends of one pipe share an inode too, so the access mode
// must be read-write as well.
func sameFile(in, out *os.File) bool {
	var a, b unix.Stat_t
	var mode int
	errA := session.Control(in, func(fd int) error {
		if err := unix.Fstat(fd, &a); err != nil {
			return err
		}
		var err error
		mode, err = unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		return err
	})
	errB := session.Control(out, func(fd int) error { return unix.Fstat(fd, &b) })
	return errA == nil && errB == nil && a.Dev == b.Dev && a.Ino == b.Ino && mode&unix.O_ACCMODE == unix.O_RDWR
}

// writeLineNow writes line to f without blocking, as far as the file
// takes it at once: it is a refusal the client should see, but a client
// that does not read must not hold the daemon. The descriptor's
// O_NONBLOCK flag is shared with the client (it belongs to the open file
// description), so it is restored.
func writeLineNow(f *os.File, line []byte) {
	_ = session.Control(f, func(fd int) error {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return err
		}
		if flags&unix.O_NONBLOCK == 0 {
			if err := unix.SetNonblock(fd, true); err != nil {
				return err
			}
			defer unix.SetNonblock(fd, false)
		}
		_, err = unix.Write(fd, line)
		return err
	})
}
