package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Client speaks the control protocol to the daemon whose control socket
// is Socket. Each call makes a connection of its own; a Client may be used
// by several goroutines at once. A daemon that cannot be reached is an
// *UnreachableError; a request it refused, a *RefusedError.
type Client struct {
	// Socket is the path of the daemon's control socket
	// (daemon.control_socket).
	Socket string
}

// UnreachableError is a socket that cannot be connected to: no daemon
// listens there, or it is not ours to use.
type UnreachableError struct {
	Path string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon at %s: %v", e.Path, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// NoDaemon reports whether the error says that no daemon listens at the
// path (nothing there, or a socket file left by one that died), rather
// than that one is there and may not be used.
func (e *UnreachableError) NoDaemon() bool {
	return errors.Is(e.Err, syscall.ENOENT) || errors.Is(e.Err, syscall.ECONNREFUSED)
}

// RefusedError is a request the daemon answered with {"ok":false}.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return "the daemon refused: " + e.Message }

// ErrDaemonGone is returned when the control connection ends before the
// daemon answered, or before it said the session ended: the daemon died.
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

// Status asks the daemon for its status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	if err := c.ask(ctx, Request{Op: OpStatus}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Kill asks the daemon to end session id, and returns once it has ended.
// A session the daemon does not know is a *RefusedError.
func (c *Client) Kill(ctx context.Context, id uint64) error {
	return c.ask(ctx, Request{Op: OpKill, Session: id}, nil)
}

// Upgrade asks the daemon to replace itself by binary (an absolute path;
// "" for its own executable) without closing a session, and returns the
// new process's pid once it serves every session. A failed upgrade is a
// *RefusedError saying why; the daemon goes on serving then.
func (c *Client) Upgrade(ctx context.Context, binary string) (int, error) {
	var r Reply
	if err := c.ask(ctx, Request{Op: OpUpgrade, Binary: binary}, &r); err != nil {
		return 0, err
	}
	return r.PID, nil
}

// UpstreamAction asks the daemon to start, stop or restart (the Action
// constants) the hosted server name, and returns, once it is done, what
// is left of its instances: for a start or restart, each has started (its
// PID) or failed to (its Cause). A daemon older than this answer returns
// no instances.
func (c *Client) UpstreamAction(ctx context.Context, name, action string) ([]Instance, error) {
	var r Reply
	if err := c.ask(ctx, Request{Op: OpUpstream, Name: name, Action: action}, &r); err != nil {
		return nil, err
	}
	return r.Instances, nil
}

// Approve asks the daemon to approve what the pinned or quarantined
// hosted server name holds (tool alone, when not ""): the tools it
// approved, and whether its quarantine ended. The views list them at once.
func (c *Client) Approve(ctx context.Context, name, tool string) (approved []string, released bool, err error) {
	var r Reply
	if err := c.ask(ctx, Request{Op: OpApprove, Name: name, Tool: tool}, &r); err != nil {
		return nil, false, err
	}
	return r.Approved, r.Released, nil
}

// Diff asks the daemon what the hosted server name holds for approval,
// and how it changed, word by word ("" when nothing).
func (c *Client) Diff(ctx context.Context, name string) (string, error) {
	var r Reply
	if err := c.ask(ctx, Request{Op: OpDiff, Name: name}, &r); err != nil {
		return "", err
	}
	return r.Diff, nil
}

// Logs gives write what the daemon keeps of a log: the standard error of
// the hosted server name, or with name "" the daemon's own log. With
// follow it goes on giving what is written until ctx ends or the daemon
// goes (ErrDaemonGone); an error of write ends it with that error.
func (c *Client) Logs(ctx context.Context, name string, follow bool, write func(string) error) error {
	return c.converse(ctx, Request{Op: OpLogs, Name: name, Follow: follow}, nil, func(r *bufio.Reader) error {
		for {
			b, err := r.ReadBytes('\n')
			if err != nil {
				if ctx.Err() != nil || !follow {
					return nil
				}
				return ErrDaemonGone
			}
			var l LogLine
			if json.Unmarshal(b, &l) == nil {
				if err := write(l.Log); err != nil {
					return err
				}
			}
			if !follow {
				return nil
			}
		}
	})
}

// Fault makes session id's coordinator fail once, as a bug would: a test
// hook the daemon honours only when it runs with SNODOD_TEST_FAULTS=1.
func (c *Client) Fault(ctx context.Context, id uint64) error {
	return c.ask(ctx, Request{Op: OpFault, Session: id}, nil)
}

// ConnectOptions are a connect's choices.
type ConnectOptions struct {
	// View is the hosted server to pass through (snodod connect NAME); ""
	// is the aggregated view. An unknown view is a *RefusedError naming
	// the configured ones.
	View string
	// Cwd is the client's working directory, where share = "cwd" and
	// "session" servers start; "" is the daemon's.
	Cwd string
}

// Handover is a session started on descriptors passed to the daemon.
type Handover struct {
	// Session is the daemon's id for the session.
	Session uint64
	c       *net.UnixConn
	r       *bufio.Reader
}

// Connect passes in and out to the daemon, which serves a session on
// them, and returns once the session has started. The caller keeps its
// own copies; it should not read in or write out while the session runs.
func (c *Client) Connect(ctx context.Context, in, out *os.File, o ConnectOptions) (*Handover, error) {
	conn, err := Dial(ctx, c.Socket)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var head Reply
	r, err := roundTrip(conn, Request{Op: OpConnect, View: o.View, Cwd: o.Cwd}, &head, in, out)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Handover{Session: head.Session, c: conn, r: r}, nil
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

// ask sends one request on a new control connection and reads its reply
// into v (when not nil); ctx ending closes the connection.
func (c *Client) ask(ctx context.Context, req Request, v any) error {
	return c.converse(ctx, req, v, nil)
}

// converse is ask that then, when rest is set, gives rest what follows the
// reply on the connection; the connection is closed when rest returns.
func (c *Client) converse(ctx context.Context, req Request, v any, rest func(*bufio.Reader) error) error {
	conn, err := Dial(ctx, c.Socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r, err := roundTrip(conn, req, v)
	if err != nil || rest == nil {
		return err
	}
	return rest(r)
}

// roundTrip sends req with files (their descriptors ride on the line's
// first byte) and decodes the first reply line into v, returning the
// reader positioned after it.
func roundTrip(c *net.UnixConn, req Request, v any, files ...*os.File) (*bufio.Reader, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := sendWithFiles(c, append(line, '\n'), files); err != nil {
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

// sendWithFiles writes line to c with the descriptors of files attached to
// its first byte (SCM_RIGHTS). The kernel never merges the bytes of two
// sendmsg calls that carry control data into one recvmsg, so the daemon's
// recvmsg that returns the line's first bytes returns the descriptors.
func sendWithFiles(c *net.UnixConn, line []byte, files []*os.File) error {
	var rights []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			rc, err := f.SyscallConn()
			if err != nil {
				return fmt.Errorf("descriptor %s: %w", f.Name(), err)
			}
			if err := rc.Control(func(fd uintptr) { fds[i] = int(fd) }); err != nil {
				return fmt.Errorf("descriptor %s: %w", f.Name(), err)
			}
		}
		rights = unix.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(line, rights, nil)
	runtime.KeepAlive(files) // the descriptors are theirs until sent
	if err != nil {
		return err
	}
	if n < len(line) { // the descriptors went with the first part
		_, err = c.Write(line[n:])
	}
	return err
}

// Login is a login to a remote server under way in the daemon: URL is the
// authorization URL a person opens; the daemon waits for the browser's
// redirect on its loopback listener, or for Complete.
type Login struct {
	URL string
	c   *net.UnixConn
	r   *bufio.Reader
}

// Login begins a login to the remote server name (snodod login NAME). The
// login runs in the daemon, which holds the server's tokens: the one login
// every client's requests then use. Close the Login when done.
func (c *Client) Login(ctx context.Context, name string) (*Login, error) {
	conn, err := Dial(ctx, c.Socket)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var head Reply
	r, err := roundTrip(conn, Request{Op: OpLogin, Name: name}, &head)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Login{URL: head.URL, c: conn, r: r}, nil
}

// Complete gives the daemon the URL the browser was redirected to, as a
// person pasted it, when the redirect could not reach the daemon (a
// browser on another machine).
func (l *Login) Complete(redirect string) error {
	line, err := json.Marshal(Request{Op: OpLogin, Redirect: redirect})
	if err != nil {
		return err
	}
	_, err = l.c.Write(append(line, '\n'))
	return err
}

// Wait waits for the login's outcome: what it got ("logged in at …"), or
// a *RefusedError saying why it failed; ctx ending abandons the login.
func (l *Login) Wait(ctx context.Context) (string, error) {
	stop := context.AfterFunc(ctx, func() { l.c.Close() })
	defer stop()
	b, err := l.r.ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", ErrDaemonGone
	}
	var r Reply
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("the daemon's answer: %w", err)
	}
	if !r.OK {
		return "", &RefusedError{Message: r.Error}
	}
	return r.Result, nil
}

// Close abandons the login if it is not over.
func (l *Login) Close() error { return l.c.Close() }

// Logout makes the daemon forget the remote server name's tokens, revoked
// first where its authorization server offers it (revoked says so; note,
// when not "", says what went wrong with a revocation).
func (c *Client) Logout(ctx context.Context, name string) (revoked bool, note string, err error) {
	var r Reply
	if err := c.ask(ctx, Request{Op: OpLogout, Name: name}, &r); err != nil {
		return false, "", err
	}
	return r.Revoked, r.Result, nil
}
