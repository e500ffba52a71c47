package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/snodod/snodod/session"
)

// The client side of the control protocol, for `snodod connect` and
// `snodod status` (and tests).

// UnreachableError is a control socket that cannot be connected to: no
// daemon runs there, or it is not ours to use.
type UnreachableError struct {
	Path string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon at %s: %v", e.Path, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// RefusedError is a request the daemon answered with {"ok":false}.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return "the daemon refused: " + e.Message }

// ErrDaemonGone is returned by Handover.Wait when the control connection
// ends before the daemon said the session ended: the daemon died.
var ErrDaemonGone = errors.New("the daemon closed the control connection before the session ended (did it die?)")

// SessionError is a session that ended with an error.
type SessionError struct {
	Session uint64
	Message string
}

func (e *SessionError) Error() string {
	return fmt.Sprintf("session %d ended: %s", e.Session, e.Message)
}

// Dial connects to one of the daemon's sockets (the session socket or the
// control socket) at path. A daemon that cannot be reached there is an
// *UnreachableError, whose message names the path once.
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "unix", path)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err // the path is said once, by UnreachableError
		}
		var sys *os.SyscallError
		if errors.As(err, &sys) {
			err = sys.Err
		}
		return nil, &UnreachableError{Path: path, Err: err}
	}
	return c.(*net.UnixConn), nil
}

// roundTrip sends req with fds and decodes the first reply line into v,
// returning the reader positioned after it.
func roundTrip(c *net.UnixConn, req Request, v any, fds ...int) (*bufio.Reader, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := sendRequest(c, append(line, '\n'), fds...); err != nil {
		return nil, fmt.Errorf("send the request: %w", err)
	}
	r := bufio.NewReader(c)
	b, err := r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrDaemonGone
		}
		return nil, fmt.Errorf("read the reply: %w", err)
	}
	var head Reply
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("read the reply: %w", err)
	}
	if !head.OK {
		return nil, &RefusedError{Message: head.Error}
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return nil, fmt.Errorf("read the reply: %w", err)
		}
	}
	return r, nil
}

// QueryStatus asks the daemon at the control socket path for its status.
func QueryStatus(ctx context.Context, path string) (*Status, error) {
	var st Status
	if err := ask(ctx, path, Request{Op: "status"}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Kill asks the daemon at the control socket path to end session id, and
// returns once it has ended. A session the daemon does not know is a
// *RefusedError.
func Kill(ctx context.Context, path string, id uint64) error {
	return ask(ctx, path, Request{Op: "kill", Session: id}, nil)
}

// ask sends one request on a new control connection and reads its reply
// into v (when not nil); ctx ending closes the connection.
func ask(ctx context.Context, path string, req Request, v any) error {
	return converse(ctx, path, req, v, nil)
}

// converse is ask that then, when rest is set, gives rest what follows the
// reply on the connection; the connection is closed when rest returns.
func converse(ctx context.Context, path string, req Request, v any, rest func(*bufio.Reader) error) error {
	c, err := Dial(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r, err := roundTrip(c, req, v)
	if err != nil || rest == nil {
		return err
	}
	return rest(r)
}

// Handover is a session started on descriptors passed to the daemon.
type Handover struct {
	// Session is the daemon's id for the session.
	Session uint64
	c       *net.UnixConn
	r       *bufio.Reader
}

// Connect passes in and out to the daemon at the control socket path, which
// serves a session on them, and returns once the session has started. The
// caller keeps its own copies; it should not read in or write out while the
// session runs.
func Connect(ctx context.Context, path string, in, out *os.File) (*Handover, error) {
	return ConnectView(ctx, path, in, out, "", "")
}

// ConnectView is Connect asking for a view: view "" is the aggregated
// view, a name the upstream passed through (snodod connect NAME); cwd is
// the client's working directory, for share = "cwd" and "session"
// upstreams. An unknown view is a *RefusedError naming the configured
// ones.
func ConnectView(ctx context.Context, path string, in, out *os.File, view, cwd string) (*Handover, error) {
	c, err := Dial(ctx, path)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var head Reply
	var r *bufio.Reader
	err = session.Control(in, func(inFD int) error {
		return session.Control(out, func(outFD int) error {
			r, err = roundTrip(c, Request{Op: "connect", View: view, Cwd: cwd}, &head, inFD, outFD)
			return err
		})
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Handover{Session: head.Session, c: c, r: r}, nil
}

// Wait waits until the session ends. It returns nil when the session ended
// cleanly, a *SessionError when it ended with an error, and ErrDaemonGone
// when the daemon went away first.
func (h *Handover) Wait() error {
	defer h.c.Close()
	for {
		b, err := h.r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return ErrDaemonGone
			}
			return fmt.Errorf("%w: %v", ErrDaemonGone, err)
		}
		var end Ended
		if json.Unmarshal(b, &end) != nil || !end.Ended {
			continue // a line this client does not know
		}
		if end.Error != "" {
			return &SessionError{Session: h.Session, Message: end.Error}
		}
		return nil
	}
}

// Close ends the control connection, and with it the session: the daemon
// kills a session whose connect client left.
func (h *Handover) Close() error { return h.c.Close() }

// Upgrade asks the daemon at the control socket path to replace itself by
// binary (an absolute path; "" for its own executable) without closing a
// session, and returns the new process's pid once it serves every session.
// A failed upgrade is a *RefusedError saying why; the daemon goes on
// serving then.
func Upgrade(ctx context.Context, path, binary string) (int, error) {
	var r Reply
	if err := ask(ctx, path, Request{Op: "upgrade", Binary: binary}, &r); err != nil {
		return 0, err
	}
	return r.PID, nil
}
