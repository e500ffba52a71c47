package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/internal/eventually"
)

// passFiles sends files over a real Unix socket with SCM_RIGHTS, as a
// daemon hands them to its successor, closes them, and returns what
// arrived.
func passFiles(t *testing.T, files []*os.File) []*os.File {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	var raw []int
	for _, f := range files {
		if err := Control(f, func(fd int) error { raw = append(raw, fd); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Sendmsg(fds[0], []byte{0}, unix.UnixRights(raw...), nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4*len(raw)))
	_, oobn, _, _, err := unix.Recvmsg(fds[1], buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v: %v", msgs, err)
	}
	got, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	var out []*os.File
	for _, fd := range got {
		out = append(out, os.NewFile(uintptr(fd), "received"))
	}
	return out
}

// A session handed over continues, as a session resumed from its Record
// and its descriptors (passed over SCM_RIGHTS, as between two processes),
// with another runtime: a request running at the hand-over is answered by
// the first, the lines sent meanwhile by the second, with no EOF and no
// repeated line; the legacy session goes on without a new initialize; the
// counters continue; a terminal stays raw across the hand-over and gets
// the settings the client left back when the resumed session ends.
func TestHandOverAndResume(t *testing.T) {
	devices := []struct {
		name string
		make func(t *testing.T) (*Device, clientEnd, func(t *testing.T, raw bool))
	}{
		{"pipe", func(t *testing.T) (*Device, clientEnd, func(*testing.T, bool)) {
			d, e := pipeDevice(t, true, Peer{PID: 1, UID: 2})
			return d, e, nil
		}},
		{"socket", func(t *testing.T) (*Device, clientEnd, func(*testing.T, bool)) {
			d, e := socketDevice(t, Peer{PID: 1, UID: 2})
			return d, e, nil
		}},
		{"pty", func(t *testing.T) (*Device, clientEnd, func(*testing.T, bool)) {
			d, e, ttyFd, orig := ptyDevice(t, Peer{PID: 1, UID: 2})
			return d, e, func(t *testing.T, raw bool) {
				t.Helper()
				tio, err := unix.IoctlGetTermios(ttyFd, unix.TCGETS)
				if err != nil {
					t.Fatal(err)
				}
				if isRaw := tio.Lflag&(unix.ICANON|unix.ECHO) == 0; isRaw != raw {
					t.Fatalf("terminal raw = %v, want %v", isRaw, raw)
				}
				if !raw && (tio.Lflag != orig.Lflag || tio.Iflag != orig.Iflag || tio.Oflag != orig.Oflag) {
					t.Fatalf("terminal settings %+v, want the client's %+v", tio, orig)
				}
			}
		}},
	}
	for _, dv := range devices {
		t.Run(dv.name, func(t *testing.T) {
			leakCheck(t)
			dev, end, checkTTY := dv.make(t)
			cat := newCatalog(t)
			cfg := config(t, cat)
			cfg.Limits.UpgradeGrace = 10 * time.Second
			s := New(7, dev, cfg)
			run(t, s)
			c := newClient(t, end)
			c.send(initialize("2025-06-18"), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			c.next()
			c.send(lcall(1, "echo", map[string]any{"text": "before"}))
			if got := text(t, c.next(), "1"); got != "before" {
				t.Fatalf("echo %q", got)
			}
			c.send(lcall(2, "block", map[string]any{"name": "b"}))
			cat.waitStarted(t, "b")

			type result struct {
				rec   *Record
				files []*os.File
				err   error
			}
			handed := make(chan result, 1)
			go func() {
				rec, files, err := s.HandOver(context.Background())
				handed <- result{rec, files, err}
			}()
			eventually.True(t, "the pause", s.handingOver)
			c.send(lcall(3, "echo", map[string]any{"text": "during"}))
			cat.Release()
			if got := text(t, c.next(), "2"); got != "released" {
				t.Fatalf("block %q", got)
			}
			r := <-handed
			if r.err != nil {
				t.Fatal(r.err)
			}
			waitDone(t, s)
			if s.Reason() != ReasonHandedOver || s.Err() != nil {
				t.Fatalf("reason %q, err %v", s.Reason(), s.Err())
			}
			if checkTTY != nil {
				checkTTY(t, true)
			}
			b, err := json.Marshal(r.rec)
			if err != nil {
				t.Fatal(err)
			}
			var rec Record
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.ID != 7 || rec.Requests != 3 || rec.Device.Kind != dev.Kind() || rec.Device.Peer != (Peer{PID: 1, UID: 2}) {
				t.Fatalf("record %s", b)
			}

			cat2 := newCatalog(t)
			s2, err := Resume(&rec, passFiles(t, r.files), config(t, cat2))
			if err != nil {
				t.Fatal(err)
			}
			run(t, s2)
			if got := text(t, c.next(), "3"); got != "during" {
				t.Fatalf("echo %q", got)
			}
			c.send(lcall(4, "echo", map[string]any{"text": "after"}))
			if got := text(t, c.next(), "4"); got != "after" {
				t.Fatalf("echo %q", got)
			}
			st := s2.Stats()
			if st.ID != 7 || st.Version != "2025-06-18" || st.Restarts != 0 || st.Kind != dev.Kind() || !st.Started.Equal(s.Stats().Started) {
				t.Fatalf("resumed stats %+v", st)
			}
			// A write is counted once it returns, which may be after the
			// client read it.
			eventually.True(t, "the byte counts continued", func() bool {
				st := s2.Stats()
				return st.BytesIn == c.bytesWritten() && st.BytesOut == c.bytesRead()
			})
			if checkTTY != nil {
				checkTTY(t, true)
				s2.Kill("test")
				waitDone(t, s2)
				checkTTY(t, false)
			} else {
				end.closeInput()
				c.eof()
				waitDone(t, s2)
			}
		})
	}
}

// A request still running when the grace ends is answered "snodod
// restarted; this request was cancelled" before the hand-over.
func TestHandOverGraceEnds(t *testing.T) {
	leakCheck(t)
	dev, end := socketDevice(t, Peer{})
	cat := newCatalog(t)
	cfg := config(t, cat)
	cfg.Limits.UpgradeGrace = time.Millisecond
	s := New(1, dev, cfg)
	run(t, s)
	c := newClient(t, end)
	c.send(call(1, "block", map[string]any{"name": "b"}))
	cat.waitStarted(t, "b")
	_, files, err := s.HandOver(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.next(); got != errLine("1", -32603, "snodod restarted; this request was cancelled") {
		t.Fatalf("got %s", got)
	}
	for _, f := range files {
		f.Close()
	}
	// The device was not closed by the session: the client sees no EOF
	// until the last descriptor is gone, which the test closed.
	c.eof()
}

// A session that ended, or is being killed, is not handed over.
func TestHandOverRefused(t *testing.T) {
	leakCheck(t)
	dev, end := socketDevice(t, Peer{})
	s := New(1, dev, config(t, newCatalog(t)))
	run(t, s)
	end.closeInput()
	waitDone(t, s)
	if _, _, err := s.HandOver(context.Background()); !errors.Is(err, ErrNotHandedOver) {
		t.Fatalf("HandOver after the end: %v", err)
	}
	dev2, _ := socketDevice(t, Peer{})
	s2 := New(2, dev2, config(t, newCatalog(t)))
	s2.Kill("test")
	run(t, s2)
	if _, _, err := s2.HandOver(context.Background()); !errors.Is(err, ErrNotHandedOver) {
		t.Fatalf("HandOver of a killed session: %v", err)
	}
	waitDone(t, s2)
	if s2.Reason() != ReasonKilled {
		t.Fatalf("reason %q", s2.Reason())
	}
}
