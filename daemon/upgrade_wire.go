package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/session"
	"github.com/snodod/snodod/upstream"
)

// The private socket of an upgrade (upgrade.go): the running daemon and
// the new process it started exchange messages over a Unix stream socket
// pair, the new process's end inherited as a descriptor named by
// UpgradeEnv. Each message is a 4-byte big-endian length and that many
// bytes of JSON (an upgradeMsg); the descriptors a message carries ride
// on its first byte (SCM_RIGHTS), and FDs says how many. Every read is a
// recvmsg with room for descriptors, and what arrives is queued in order,
// so a message's descriptors are the next FDs of the queue whatever the
// kernel's segmentation.

// UpgradeEnv names the environment variable that tells a process started
// by an upgrade which descriptor is its end of the private socket.
const UpgradeEnv = "SNODOD_UPGRADE_FD"

// upgradeFormat is the version of the messages: a new process that does
// not speak it says so, and the upgrade fails before anything moved.
const upgradeFormat = 1

const (
	// maxUpgradeMsg bounds one message: a session's unread input is at
	// most a batch of lines and one line of daemon.max_line_bytes, which
	// base64 makes a third bigger.
	maxUpgradeMsg = 64 << 20
	// maxUpgradeFDs bounds the descriptors of one message.
	maxUpgradeFDs = 8
)

// upgradeMsg is one message, in either direction.
type upgradeMsg struct {
	// Type is hello (old to new: the format, the listeners), ready (new:
	// it serves), error (either: why it cannot go on), session (old: one
	// session), done (old: no more sessions), adopted (new: every session
	// serves), main (old: systemd now follows the new process).
	Type    string `json:"type"`
	Format  int    `json:"format,omitempty"`
	FDs     int    `json:"fds,omitempty"`
	Error   string `json:"error,omitempty"`
	PID     int    `json:"pid,omitempty"`
	NextID  uint64 `json:"next_id,omitempty"`
	Version string `json:"version,omitempty"`

	Listeners []listenerRecord `json:"listeners,omitempty"`
	Session   *movedSession    `json:"session,omitempty"`

	// Servers, in ready, says the new process adopts hosted servers; an
	// upstream message (old to new, after adopted, before main) then
	// carries one, its stdin, stdout and stderr as its descriptors.
	Servers  bool                 `json:"servers,omitempty"`
	Upstream *upstream.KeptServer `json:"upstream,omitempty"`
}

// listenerRecord is one listener of a hello; its descriptor is the next of
// the message's.
type listenerRecord struct {
	// Name is session, control, lock (the session socket's lock file) or
	// http.
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Created bool   `json:"created,omitempty"`
}

// movedSession is one session of a hand-over. Its descriptors are the
// device's (Session.Device.Files of them), then the control connection of
// the `snodod connect` waiting for it, when Control is set, then its crash
// record, when Journal is set.
type movedSession struct {
	Session *session.Record `json:"session"`
	Via     string          `json:"via"`
	Control bool            `json:"control,omitempty"`
	// View and Cwd are where the session is served (a connect's view
	// and working directory).
	View string `json:"view,omitempty"`
	Cwd  string `json:"cwd,omitempty"`
	// Journal says the session's crash record (a memfd, journal.go)
	// follows the other descriptors.
	Journal bool `json:"journal,omitempty"`
}

// wire is one end of the private socket. send and recv may be used by one
// goroutine each at a time.
type wire struct {
	c      *net.UnixConn
	queued []*os.File // received descriptors not yet claimed by a message
	buf    []byte     // received bytes not yet consumed
}

func newWire(f *os.File) (*wire, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("upgrade socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("upgrade socket: not a Unix socket")
	}
	return &wire{c: uc}, nil
}

// send writes m with files (m.FDs is set here). The files stay the
// caller's.
func (w *wire) send(m upgradeMsg, files ...*os.File) error {
	m.FDs = len(files)
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) > maxUpgradeMsg {
		return fmt.Errorf("upgrade message of %d bytes, over %d", len(body), maxUpgradeMsg)
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	frame = append(frame, body...)
	fds, err := rawFDs(files)
	if err != nil {
		return fmt.Errorf("upgrade message: %w", err)
	}
	err = sendRequest(w.c, frame, fds...)
	runtime.KeepAlive(files)
	return err
}

// recv reads the next message and the descriptors it carries, which the
// caller owns. A deadline of zero waits for ever.
func (w *wire) recv(deadline time.Time) (upgradeMsg, []*os.File, error) {
	var m upgradeMsg
	if err := w.c.SetReadDeadline(deadline); err != nil {
		return m, nil, err
	}
	head, err := w.fill(4)
	if err != nil {
		return m, nil, err
	}
	n := int(binary.BigEndian.Uint32(head))
	if n > maxUpgradeMsg {
		return m, nil, fmt.Errorf("upgrade message of %d bytes, over %d", n, maxUpgradeMsg)
	}
	body, err := w.fill(4 + n)
	if err != nil {
		return m, nil, err
	}
	err = json.Unmarshal(body[4:], &m)
	w.buf = w.buf[4+n:]
	if err != nil {
		return m, nil, fmt.Errorf("upgrade message: %w", err)
	}
	if m.FDs < 0 || m.FDs > len(w.queued) {
		return m, nil, fmt.Errorf("upgrade message %q says %d descriptors, %d arrived", m.Type, m.FDs, len(w.queued))
	}
	files := w.queued[:m.FDs:m.FDs]
	w.queued = w.queued[m.FDs:]
	return m, files, nil
}

// fill reads until n bytes are buffered, queuing the descriptors that come.
func (w *wire) fill(n int) ([]byte, error) {
	oob := make([]byte, unix.CmsgSpace(maxUpgradeFDs*4))
	for len(w.buf) < n {
		// Read straight into the buffer's free room: a message may be
		// tens of MiB (a session's unread input), read once, not copied.
		w.buf = slices.Grow(w.buf, max(n-len(w.buf), 4096))
		k, oobn, flags, _, err := w.c.ReadMsgUnix(w.buf[len(w.buf):cap(w.buf)], oob)
		k, oobn = max(k, 0), max(oobn, 0)
		got, perr := parseRights(oob[:oobn])
		w.queued = append(w.queued, got...)
		w.buf = w.buf[:len(w.buf)+k]
		switch {
		case perr != nil:
			return nil, perr
		case flags&unix.MSG_CTRUNC != 0:
			return nil, fmt.Errorf("more than %d descriptors with an upgrade message", maxUpgradeFDs)
		case err == nil && k == 0 && oobn == 0:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return w.buf[:n], nil
}

// close closes the socket and the descriptors no message claimed.
func (w *wire) close() {
	w.c.Close()
	closeFiles(w.queued)
	w.queued = nil
}
