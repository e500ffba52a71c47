package daemon

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/snodod/snodod/daemon/control"
)

// During a drain the session socket is gone at once (no new sessions), but
// the control socket answers until Run returns: `snodod status` then says
// "draining" (with the sessions still finishing) instead of "not running",
// and a `snodod connect` is refused with a reason. Nothing started here
// counts as a handshake, so the drain never waits for these connections.

// drainingReadTimeout bounds the wait for a request line during a drain.
const drainingReadTimeout = time.Second

// answerWhileDraining accepts on the control listener l, whose acceptor
// has stopped, until l is closed at the end of Run.
func (d *Daemon) answerWhileDraining(l *listener) {
	d.late.Add(1)
	go func() {
		defer d.late.Done()
		// The stopped acceptor interrupted Accept with a deadline in the
		// past; it may still be setting it, so a timeout retries.
		_ = l.ln.SetDeadline(time.Time{})
		for {
			c, err := l.ln.AcceptUnix()
			switch {
			case err == nil:
			case errors.Is(err, os.ErrDeadlineExceeded):
				_ = l.ln.SetDeadline(time.Time{})
				continue
			case transientAcceptError(err):
				time.Sleep(10 * time.Millisecond)
				continue
			default:
				return // closed at the end of Run
			}
			d.late.Add(1)
			go func() {
				defer d.late.Done()
				d.serveDraining(c)
			}()
		}
	}()
}

// serveDraining answers one control connection during the drain: status
// (its State is "draining") as usual, anything else refused: a session in
// the drain is already ending, within daemon.shutdown_grace. The
// descriptors of a connect are closed after the MCP client they belong to
// is told, on its standard output, with the line a session socket client
// would get.
func (d *Daemon) serveDraining(c *net.UnixConn) {
	defer c.Close()
	line, files, err := readRequest(c, time.Now().Add(drainingReadTimeout))
	if err != nil {
		closeFiles(files)
		reply(c, control.Reply{Error: err.Error()})
		return
	}
	d.answerDraining(c, line, files)
}

// answerDraining answers the request line of a control connection during
// the drain, as serveDraining says, and closes files. The caller closes c.
func (d *Daemon) answerDraining(c *net.UnixConn, line []byte, files []*os.File) {
	defer closeFiles(files)
	req, _, ok := d.admitRequest(c, line)
	if !ok {
		return
	}
	switch {
	case req.Op == "status":
		reply(c, statusReply{OK: true, Status: d.Status()})
		return
	case req.Op == "connect" && len(files) == 2:
		writeLineNow(files[1], refusalLine(errShuttingDown))
	}
	reply(c, control.Reply{Error: errShuttingDown.Message + " (draining)"})
}
