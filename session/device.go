package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Kind says what a device is.
type Kind string

const (
	KindPipe   Kind = "pipe"   // a pipe pair, or anything that is neither of the others
	KindSocket Kind = "socket" // a stream socket (one descriptor both ways)
	KindPTY    Kind = "pty"    // a terminal, usually the session side of a pty
)

// Peer is the process at the other end, from SO_PEERCRED or the control
// socket. Zero fields are unknown.
type Peer struct{ PID, UID int }

// Device is one connection's descriptors, owned by the daemon: it outlives
// every session instance that serves it, and with it the bytes the kernel
// still buffers and a terminal's raw mode. Its methods may be called from
// any goroutine.
type Device struct {
	kind    Kind
	peer    Peer
	in, out *os.File // the same *os.File when one descriptor serves both ways
	inTTY   bool     // reads from a terminal: EIO is end of input

	ttys     []ttyState // terminals made raw, in the order they were
	blocking []*os.File // descriptors whose description was blocking when handed over

	bytesOut atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// ttyState is a terminal made raw and how to restore it: state from
// x/term, or orig, the settings it had as plain data, which a device
// restored in another process has only (handover.go).
type ttyState struct {
	f     *os.File
	state *term.State
	orig  *unix.Termios // nil where it cannot be read (not Linux)
}

// NewDevice takes ownership of in and out (pass the same *os.File twice for
// a socket or a terminal) and prepares them for a session:
//
//   - Each descriptor is made non-blocking and wrapped anew, so Go's poller
//     serves it and read and write deadlines work (see reopenNonblocking).
//   - The kind is detected: a socket (S_ISSOCK on the input), a terminal
//     (either side; isatty), otherwise a pipe.
//   - A terminal is put into raw mode and its settings are remembered for
//     Close. Canonical mode would edit lines, echo the client's requests
//     back into its own input, turn ^C into signals and truncate a line at
//     4,095 bytes (the line discipline's buffer on Linux); output
//     processing would turn every "\n" into "\r\n". Raw mode has none of
//     that (docs/transport.md §3.4).
//
// On error, in and out are closed.
func NewDevice(in, out *os.File, peer Peer) (_ *Device, err error) {
	if in == nil || out == nil {
		for _, f := range []*os.File{in, out} {
			if f != nil {
				f.Close()
			}
		}
		return nil, errors.New("session: a device needs both an input and an output")
	}
	d := &Device{peer: peer}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.in, err = d.adopt(in); err != nil {
		if out != in {
			out.Close()
		}
		return nil, err
	}
	d.out = d.in
	if out != in {
		if d.out, err = d.adopt(out); err != nil {
			d.out = nil
			return nil, err
		}
	}
	var st unix.Stat_t
	if err := Control(d.in, func(fd int) error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, fmt.Errorf("session: stat %s: %w", d.in.Name(), err)
	}
	for _, f := range d.Files() {
		if err := Control(f, func(fd int) error { return d.makeRaw(f, fd) }); err != nil {
			return nil, fmt.Errorf("session: raw mode on %s: %w", f.Name(), err)
		}
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFSOCK:
		d.kind = KindSocket
	case len(d.ttys) > 0:
		d.kind = KindPTY
	default:
		d.kind = KindPipe
	}
	return d, nil
}

// adopt makes f pollable and remembers whether its description was
// blocking; f itself is consumed.
func (d *Device) adopt(f *os.File) (*os.File, error) {
	nf, wasBlocking, err := reopenNonblocking(f)
	if err != nil {
		return nil, err
	}
	if wasBlocking {
		d.blocking = append(d.blocking, nf)
	}
	return nf, nil
}

// reopenNonblocking returns a pollable *os.File for f's descriptor and
// whether the open file description was blocking before; f is closed.
//
// Why: os.NewFile registers a descriptor with Go's poller only when it is
// already non-blocking. A descriptor received over SCM_RIGHTS or inherited
// is usually blocking, and then SetReadDeadline fails with ErrNoDeadline: a
// blocked Read cannot be interrupted (a restart could not take the input
// over, Close could not stop the reader) and a write to a client that
// stopped reading blocks forever instead of failing after WriteTimeout.
// Calling f.Fd() would be no way out either: it switches the file back to
// blocking mode for good. So the descriptor is read through SyscallConn,
// duplicated, the duplicate set O_NONBLOCK and wrapped by os.NewFile, which
// now registers it; the original is closed.
func reopenNonblocking(f *os.File) (*os.File, bool, error) {
	defer f.Close()
	dup, wasBlocking := -1, false
	err := Control(f, func(fd int) error {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return err
		}
		wasBlocking = flags&unix.O_NONBLOCK == 0
		if dup, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			dup = -1
			return err
		}
		return unix.SetNonblock(dup, true)
	})
	if err != nil {
		if dup >= 0 {
			unix.Close(dup)
		}
		return nil, false, fmt.Errorf("session: make %s non-blocking: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(dup), f.Name()), wasBlocking, nil
}

// makeRaw puts the terminal behind fd into raw mode: no echo, no line
// editing or 4,095-byte line limit, no signal characters, no output
// newline translation. Anything else is left alone.
func (d *Device) makeRaw(f *os.File, fd int) error {
	if !term.IsTerminal(fd) {
		return nil
	}
	if f == d.in {
		d.inTTY = true
	}
	orig, _ := getTermios(fd) // for a hand-over; nil leaves it impossible
	state, err := term.MakeRaw(fd)
	if err != nil {
		return err
	}
	d.ttys = append(d.ttys, ttyState{f: f, state: state, orig: orig})
	return nil
}

// Kind is the device's kind.
func (d *Device) Kind() Kind { return d.kind }

// Peer is the process at the other end, as NewDevice was told.
func (d *Device) Peer() Peer { return d.peer }

// BytesOut is the number of bytes written to the device so far.
func (d *Device) BytesOut() int64 { return d.bytesOut.Load() }

// Close restores a terminal's settings, gives back a blocking description
// its blocking mode, and closes the descriptors the device owns. Call it
// once nothing reads or writes the device any more (a Session does, when it
// ends). Close is idempotent; later calls return the first call's error.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		// In reverse order: when two descriptors name one terminal, the
		// first one's state is the original.
		for i := len(d.ttys) - 1; i >= 0; i-- {
			t := d.ttys[i]
			err := Control(t.f, func(fd int) error {
				if t.state == nil {
					return setTermios(fd, t.orig)
				}
				return term.Restore(fd, t.state)
			})
			// A hung-up terminal (its master closed) refuses every ioctl
			// with EIO; there is nothing left to restore then.
			if err != nil && !errors.Is(err, unix.EIO) {
				errs = append(errs, fmt.Errorf("restore terminal %s: %w", t.f.Name(), err))
			}
		}
		// O_NONBLOCK belongs to the open file description, which the client
		// may share: a terminal handed over by `snodod connect` is the
		// shell's own, and a shell that finds it non-blocking fails its next
		// read with EAGAIN. Leave it as it was found.
		for _, f := range d.blocking {
			if err := Control(f, func(fd int) error { return unix.SetNonblock(fd, false) }); err != nil {
				errs = append(errs, fmt.Errorf("restore blocking mode of %s: %w", f.Name(), err))
			}
		}
		for _, f := range d.Files() {
			if err := f.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// Files lists the distinct descriptors the device owns, in the order of its
// Record: input, then output when it is another descriptor. They stay the
// device's: a caller passes duplicates on, never closes these.
func (d *Device) Files() []*os.File {
	switch {
	case d.in == nil:
		return nil
	case d.out == nil || d.out == d.in:
		return []*os.File{d.in}
	}
	return []*os.File{d.in, d.out}
}

// input is the device as the transport reads it.
func (d *Device) input() io.Reader { return deviceInput{d} }

// output is the device as the transport writes it.
func (d *Device) output() io.Writer { return deviceOutput{d} }

// deviceInput turns EIO on a terminal into end of input. It keeps
// SetReadDeadline, which stdio.Reader.Close uses to stop a blocked read,
// and SyscallConn, with which the Reader reads the descriptor itself and
// holds no buffer while it waits (it too reads EIO as end of input). The
// Reader counts what it reads.
type deviceInput struct{ d *Device }

func (r deviceInput) Read(p []byte) (int, error) {
	n, err := r.d.in.Read(p)
	// When the other side of a pty goes away, Linux fails reads with EIO:
	// on the master once the session side is closed, and on the session
	// side while the master's close hangs it up (once the hang-up is
	// complete, reads return 0 instead). Either is end of input, not a
	// read error to answer with -32700 (docs/transport.md §3.4, §12.1).
	if err != nil && r.d.inTTY && errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

func (r deviceInput) SetReadDeadline(t time.Time) error { return r.d.in.SetReadDeadline(t) }

func (r deviceInput) SyscallConn() (syscall.RawConn, error) { return r.d.in.SyscallConn() }

// deviceOutput counts what is written. It keeps SetWriteDeadline, which
// bounds every frame by the write timeout.
type deviceOutput struct{ d *Device }

func (w deviceOutput) Write(p []byte) (int, error) {
	n, err := w.d.out.Write(p)
	w.d.bytesOut.Add(int64(n))
	return n, err
}

func (w deviceOutput) SetWriteDeadline(t time.Time) error { return w.d.out.SetWriteDeadline(t) }

// Control runs fn with c's descriptor (an *os.File, a net connection).
// Unlike os.File.Fd, it leaves the descriptor's mode alone: Fd would put
// it back into blocking mode, disabling deadlines, and that mode is
// shared with whoever else holds the description (the client).
func Control(c syscall.Conn, fn func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
