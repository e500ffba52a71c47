package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/protocol"
)

// Running out of descriptors (EMFILE, ENFILE) is the one resource shortage a
// local client can cause at will, by opening connections. A daemon at its
// limit cannot even accept a connection to tell the client so, and accept(2)
// fails before it looks for one, so the client would wait in the listen
// backlog, or get a bare reset from a connection accepted with the last
// descriptor and closed when the session could not be built. Instead the
// daemon keeps one descriptor in reserve (a spare, /dev/null): at the limit,
// an acceptor that sees a client waiting gives the spare up, accepts the
// client with it, and, unless descriptors were freed in the meantime,
// answers it with one line saying the daemon is out of descriptors, closes
// it and takes the spare back (docs/security.md, "What one client cannot do
// to the others").

// fdShortage reports whether err is the process's or the system's
// descriptor limit.
func fdShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fdLimit is this process's RLIMIT_NOFILE soft limit, 0 when unknown.
func fdLimit() uint64 {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return rl.Cur
}

// outOfFDsText says the daemon is out of descriptors and what to do.
func outOfFDsText(prefix string) string {
	limit := "its limit"
	if n := fdLimit(); n > 0 {
		limit = fmt.Sprintf("RLIMIT_NOFILE = %d", n)
	}
	return fmt.Sprintf("%s out of file descriptors (%s); try again once other clients have left, or raise the daemon's limit (LimitNOFILE= in its unit, ulimit -n)", prefix, limit)
}

// errPassedFDsLost is a control request whose descriptors the kernel
// could not install in the daemon (it dropped them): the daemon is at its
// limit. Its text is what `snodod connect` shows.
var errPassedFDsLost = errors.New(outOfFDsText("the daemon is"))

// fdQuiet is how long a shortage of descriptors must have refused nobody
// for the next session's start to end it: at the limit, sessions still
// start whenever a refused client's descriptor is freed, and the log
// should say "short" and "recovered" once per shortage, not per client.
const fdQuiet = time.Second

// fdShortage notes that the daemon ran out of descriptors: the first time
// since service last recovered, it says so in the log (once, however many
// clients are refused).
func (d *Daemon) fdShortage() {
	d.fdLastShort.Store(time.Now().UnixNano())
	if d.fdShort.CompareAndSwap(false, true) {
		d.log.Warn("out of file descriptors: new clients are refused until some are freed", "limit", fdLimit())
	}
}

// fdRefusal counts a client refused for want of descriptors.
func (d *Daemon) fdRefusal(socket string) {
	d.fdRefused.Add(1)
	d.refusal("descriptors")
	d.log.Debug("client refused: out of file descriptors", "socket", socket)
}

// fdRecovered is called as a session starts: a shortage that has refused
// nobody for fdQuiet is over, and the log says how many clients it
// refused.
func (d *Daemon) fdRecovered() {
	if !d.fdShort.Load() || time.Since(time.Unix(0, d.fdLastShort.Load())) < fdQuiet {
		return
	}
	if d.fdShort.CompareAndSwap(true, false) {
		d.log.Info("file descriptors available again; serving new clients", "refused", d.fdRefused.Swap(0))
	}
}

// errOutOfFDs is the refusal line of the session socket.
func errOutOfFDs() *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInternalError, Message: outOfFDsText("Server")}
}

// spareFD is the descriptor held in reserve. Its methods may be called
// from any goroutine; the acceptors take turns with it.
type spareFD struct {
	mu sync.Mutex
	f  *os.File // nil while given up (or not yet regained)
}

// regain opens the spare if it is not held; it reports whether it is.
// mu is held.
func (s *spareFD) regain() bool {
	if s.f == nil {
		s.f, _ = os.Open(os.DevNull)
	}
	return s.f != nil
}

// close gives the spare up for good (the daemon stops).
func (s *spareFD) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// acceptWithSpare accepts a client waiting on l with the spare descriptor.
// served is true when a descriptor was free again afterwards (the spare
// was regained), so the client can be served as usual; otherwise the
// caller refuses it. It returns an error when nothing could be accepted.
func (s *spareFD) acceptWithSpare(l *net.UnixListener) (c *net.UnixConn, served bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.regain() {
		return nil, false, syscall.EMFILE
	}
	s.f.Close()
	s.f = nil
	c, err = l.AcceptUnix()
	return c, s.regain(), err
}

// clientWaiting waits up to d for a connection to be pending on l.
func clientWaiting(l *net.UnixListener, d time.Duration) bool {
	rc, err := l.SyscallConn()
	if err != nil {
		return false
	}
	ready := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(d/time.Millisecond))
		ready = err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	})
	return ready
}

// refuseNow writes line to a client refused for want of descriptors and
// closes the connection at once: the acceptor does it itself, so it must
// not wait on the client. A Unix socket's bytes are in the kernel the
// moment they are sent, so what the client sent before the refusal is
// there to be read at once (see writeAndClose).
func refuseNow(c *net.UnixConn, line []byte) {
	writeAndClose(c, line, 100*time.Millisecond, 10*time.Millisecond)
}
