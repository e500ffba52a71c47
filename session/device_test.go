package session

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/internal/eventually"
)

// Every kind of device serves a request, and end of input (EOF on a pipe or
// socket, the master's close on a pty) ends the session cleanly.
func TestServesEveryDevice(t *testing.T) {
	peer := Peer{PID: os.Getpid(), UID: os.Getuid()}
	for _, tc := range []struct {
		name string
		kind Kind
		open func(*testing.T) (*Device, clientEnd)
	}{
		{"pipe", KindPipe, func(t *testing.T) (*Device, clientEnd) { return pipeDevice(t, false, peer) }},
		{"blocking-pipe", KindPipe, func(t *testing.T) (*Device, clientEnd) { return pipeDevice(t, true, peer) }},
		{"socket", KindSocket, func(t *testing.T) (*Device, clientEnd) { return socketDevice(t, peer) }},
		{"pty", KindPTY, func(t *testing.T) (*Device, clientEnd) {
			dev, end, _, _ := ptyDevice(t, peer)
			return dev, end
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			cfg := config(t, newCatalog(t))
			dev, end := tc.open(t)
			if dev.Kind() != tc.kind {
				t.Fatalf("kind %q, want %q", dev.Kind(), tc.kind)
			}
			s := New(3, dev, cfg)
			if want := "session 3 (" + string(tc.kind) + ", pid " + strconv.Itoa(peer.PID) + ")"; s.String() != want {
				t.Fatalf("String() = %q, want %q", s.String(), want)
			}
			run(t, s)
			c := newClient(t, end)
			c.send(call(1, "echo", map[string]any{"text": "hello"}))
			if got := text(t, c.next(), "1"); got != "hello" {
				t.Fatalf("echo returned %q", got)
			}
			end.closeInput()
			waitDone(t, s)
			if err := s.Err(); err != nil {
				t.Fatalf("Err() = %v, want nil", err)
			}
			if err := dev.Close(); err != nil {
				t.Fatalf("closing the device: %v", err)
			}
			c.eof()
		})
	}
}

// A pty left in canonical mode by the client is made raw: a 1,000,000-byte
// request line and a 1,000,000-byte result cross intact, nothing is echoed,
// no newline is translated; when the session ends the terminal gets its
// settings and its blocking mode back.
func TestPTYRawMode(t *testing.T) {
	leakCheck(t)
	cfg := config(t, newCatalog(t))
	dev, end, ttyFd, orig := ptyDevice(t, Peer{})
	if orig.Lflag&unix.ICANON == 0 || orig.Lflag&unix.ECHO == 0 {
		t.Fatalf("the test pty starts raw already: lflag %#x", orig.Lflag)
	}
	raw, err := unix.IoctlGetTermios(ttyFd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 || raw.Oflag&unix.OPOST != 0 || raw.Iflag&unix.ICRNL != 0 {
		t.Fatalf("not raw: iflag %#x oflag %#x lflag %#x", raw.Iflag, raw.Oflag, raw.Lflag)
	}
	s := New(4, dev, cfg)
	stop := run(t, s)
	c := newClient(t, end)

	// The request line is exactly 1,000,000 bytes, newline included.
	empty := call(1, "echo", map[string]any{"text": ""})
	want := pattern(1_000_000 - len(empty) - 1)
	big := call(1, "echo", map[string]any{"text": want})
	if len(big)+1 != 1_000_000 {
		t.Fatalf("request line is %d bytes", len(big)+1)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(end.w, big+"\n")
		wrote <- err
	}()
	l := c.next() // the first line: an echo of the request would come first
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if got := text(t, l, "1"); got != want {
		t.Fatalf("echoed text differs: %d bytes, want %d", len(got), len(want))
	}

	c.send(call(2, "fill", map[string]any{"n": 1_000_000}))
	l = c.next()
	if strings.ContainsRune(l, '\r') {
		t.Fatal("output newline translation is on")
	}
	if got := text(t, l, "2"); got != pattern(1_000_000) {
		t.Fatalf("the 1,000,000-byte result differs (%d bytes)", len(got))
	}

	stop() // daemon shutdown
	waitDone(t, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	after, err := unix.IoctlGetTermios(ttyFd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Iflag != orig.Iflag || after.Oflag != orig.Oflag || after.Cflag != orig.Cflag || after.Lflag != orig.Lflag || after.Cc != orig.Cc {
		t.Fatalf("termios not restored:\n got  %+v\n want %+v", after, orig)
	}
	flags, err := unix.FcntlInt(uintptr(ttyFd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		t.Fatal("the terminal was left non-blocking")
	}
}

// The other side of a pty going away is end of input: the session ends
// cleanly, writes nothing and logs no read error. Closing the master hangs
// the session side up (its reads fail with EIO, or return 0 once the
// hang-up is complete); a device holding the master instead (a terminal
// emulator's end) sees EIO once the client's tty is closed.
func TestPTYHangUpIsEOF(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(*testing.T) (*Device, clientEnd)
	}{
		{"session side", func(t *testing.T) (*Device, clientEnd) {
			dev, end, _, _ := ptyDevice(t, Peer{})
			return dev, end
		}},
		{"master side", func(t *testing.T) (*Device, clientEnd) {
			master, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pty: %v", err)
			}
			// creack/pty left the master blocking (its ioctls call
			// Fd()); NewDevice makes it pollable again.
			dev, err := NewDevice(master, master, Peer{})
			if err != nil {
				t.Fatal(err)
			}
			closeAll := func() { tty.Close() }
			t.Cleanup(closeAll)
			return dev, clientEnd{r: tty, w: tty, closeInput: closeAll, closeAll: closeAll}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			logs, logger := captureLogs()
			cfg := config(t, newCatalog(t))
			cfg.Logger = logger
			dev, end := tc.open(t)
			if dev.Kind() != KindPTY {
				t.Fatalf("kind %q", dev.Kind())
			}
			s := New(5, dev, cfg)
			run(t, s)
			c := newClient(t, end)
			c.send(call(1, "echo", map[string]any{"text": "x"}))
			text(t, c.next(), "1")
			eventually.True(t, "bytes out counted", func() bool { return s.Stats().BytesOut == c.bytesRead() })
			out := s.Stats().BytesOut

			end.closeInput()
			waitDone(t, s)
			if err := s.Err(); err != nil {
				t.Fatalf("Err() = %v, want nil", err)
			}
			if got := s.Stats().BytesOut; got != out {
				t.Fatalf("%d bytes written after the hang-up", got-out)
			}
			// Nothing is logged but the end line, which says hangup.
			for _, r := range logs.records(t) {
				if r["level"] != "DEBUG" && !(r["msg"] == "session ended" && r["reason"] == ReasonHangup) {
					t.Errorf("unexpected log record %v", r)
				}
			}
			if err := dev.Close(); err != nil {
				t.Fatalf("closing a hung-up device: %v", err)
			}
		})
	}
}

func TestNewDeviceRefusesNil(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := NewDevice(r, nil, Peer{}); err == nil {
		t.Fatal("NewDevice accepted a nil output")
	}
	// r was taken over, and closed.
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("input not closed: %v", err)
	}
}

// Close is idempotent, and a device given blocking descriptors gets them
// back blocking.
func TestDeviceCloseRestoresBlocking(t *testing.T) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	keep, err := unix.Dup(fds[0]) // shares the description, as a client does
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(keep)
	in, out := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	dev, err := NewDevice(in, out, Peer{})
	if err != nil {
		t.Fatal(err)
	}
	if dev.Kind() != KindPipe {
		t.Fatalf("kind %q", dev.Kind())
	}
	if flags, _ := unix.FcntlInt(uintptr(keep), unix.F_GETFL, 0); flags&unix.O_NONBLOCK == 0 {
		t.Fatal("the device is not non-blocking")
	}
	// Deadlines work, so a blocked read can be stopped.
	in2 := dev.input().(interface{ SetReadDeadline(time.Time) error })
	if err := in2.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatalf("no read deadline: %v", err)
	}
	if _, err := dev.input().Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read returned %v, want a deadline error", err)
	}
	if err := dev.output().(interface{ SetWriteDeadline(time.Time) error }).SetWriteDeadline(time.Time{}); err != nil {
		t.Fatalf("no write deadline: %v", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if flags, _ := unix.FcntlInt(uintptr(keep), unix.F_GETFL, 0); flags&unix.O_NONBLOCK != 0 {
		t.Fatal("blocking mode not restored")
	}
}

// A terminal handed over as two descriptors (a client's fds 0 and 1) is
// made raw through both, and gets its original settings back.
func TestPTYTwoDescriptors(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	var fd0, fd1 int
	Control(tty, func(fd int) error {
		fd0, fd1 = fd, -1
		fd1, err = unix.Dup(fd)
		return err
	})
	orig, err := unix.IoctlGetTermios(fd0, unix.TCGETS)
	if err != nil || fd1 < 0 {
		t.Fatal(err)
	}
	keep, err := unix.Dup(fd0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(keep)
	dev, err := NewDevice(tty, os.NewFile(uintptr(fd1), "tty-out"), Peer{})
	if err != nil {
		t.Fatal(err)
	}
	if dev.Kind() != KindPTY {
		t.Fatalf("kind %q", dev.Kind())
	}
	if raw, _ := unix.IoctlGetTermios(keep, unix.TCGETS); raw.Lflag&unix.ICANON != 0 || raw.Oflag&unix.OPOST != 0 {
		t.Fatal("not raw")
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := unix.IoctlGetTermios(keep, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != orig.Lflag || after.Oflag != orig.Oflag || after.Iflag != orig.Iflag {
		t.Fatalf("termios not restored: %+v, want %+v", after, orig)
	}
}
