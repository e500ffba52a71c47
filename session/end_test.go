package session

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/transport/stdio"
)

// Every end of a session is logged in one line: the device, the peer,
// how long it lasted, how many requests it served, and why it ended.
func TestEndReasons(t *testing.T) {
	for _, tc := range []struct {
		name   string
		device func(t *testing.T) (*Device, clientEnd)
		end    func(t *testing.T, s *Session, end clientEnd, stop func())
		reason string
	}{
		{"eof", func(t *testing.T) (*Device, clientEnd) { return pipeDevice(t, false, Peer{PID: 42}) },
			func(_ *testing.T, _ *Session, end clientEnd, _ func()) { end.closeInput() }, ReasonEOF},
		{"hangup", func(t *testing.T) (*Device, clientEnd) {
			dev, end, _, _ := ptyDevice(t, Peer{PID: 42})
			return dev, end
		}, func(_ *testing.T, _ *Session, end clientEnd, _ func()) { end.closeAll() }, ReasonHangup},
		{"drained", func(t *testing.T) (*Device, clientEnd) { return pipeDevice(t, false, Peer{PID: 42}) },
			func(_ *testing.T, _ *Session, _ clientEnd, stop func()) { stop() }, ReasonDrained},
		{"killed", func(t *testing.T) (*Device, clientEnd) { return pipeDevice(t, false, Peer{PID: 42}) },
			func(_ *testing.T, s *Session, _ clientEnd, _ func()) { s.Kill("by the test") }, ReasonKilled},
		{"restart budget", func(t *testing.T) (*Device, clientEnd) { return pipeDevice(t, false, Peer{PID: 42}) },
			func(_ *testing.T, s *Session, _ clientEnd, _ func()) {
				for range limits.DefaultRestartIntensity + 1 {
					fault(s)
				}
			}, ReasonRestartBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			logs, logger := captureLogs()
			cfg := config(t, newCatalog(t))
			cfg.Logger = logger
			dev, end := tc.device(t)
			s := New(3, dev, cfg)
			stop := run(t, s)
			c := newClient(t, end)
			c.send(lcall(1, "echo", map[string]any{"text": "a"}), lcall(2, "echo", map[string]any{"text": "b"}))
			c.next()
			c.next()
			if s.Reason() != "" {
				t.Fatalf("Reason() = %q while the session runs", s.Reason())
			}
			tc.end(t, s, end, stop)
			waitDone(t, s)
			if got := s.Reason(); got != tc.reason {
				t.Errorf("Reason() = %q, want %q (Err %v)", got, tc.reason, s.Err())
			}
			var ends []map[string]any
			for _, r := range logs.records(t) {
				if r["msg"] == "session ended" {
					ends = append(ends, r)
				}
			}
			if len(ends) != 1 {
				t.Fatalf("%d end lines, want 1: %v", len(ends), logs.records(t))
			}
			e := ends[0]
			if e["level"] != "INFO" || e["session"] != float64(3) || e["kind"] != string(dev.Kind()) ||
				e["peer_pid"] != float64(42) || e["requests"] != float64(2) || e["reason"] != tc.reason || e["duration"] == nil {
				t.Errorf("end line %v", e)
			}
		})
	}
}

// Kill cancels the session's requests at once (there is no grace: an hour
// here), answers them, closes the device and restores a terminal.
func TestKill(t *testing.T) {
	leakCheck(t)
	cat := newCatalog(t)
	cfg := config(t, cat)
	cfg.Limits.ShutdownGrace = time.Hour
	dev, end, ttyFd, orig := ptyDevice(t, Peer{})
	s := New(5, dev, cfg)
	run(t, s)
	c := newClient(t, end)
	c.send(call(1, "block", map[string]any{"name": "b"}))
	cat.waitStarted(t, "b")
	s.Kill("by the test")
	if got, want := c.next(), errLine("1", -32603, "Session closed by server"); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	waitDone(t, s)
	if err := s.Err(); !errors.Is(err, stdio.ErrKilled) || err.Error() != "session killed: by the test" {
		t.Errorf("Err() = %v", err)
	}
	now, err := unix.IoctlGetTermios(ttyFd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if now.Lflag != orig.Lflag || now.Iflag != orig.Iflag || now.Oflag != orig.Oflag {
		t.Errorf("the terminal is not restored: lflag %#x, want %#x", now.Lflag, orig.Lflag)
	}
	s.Kill("again") // an ended session is left alone
	if err := s.Err(); err.Error() != "session killed: by the test" {
		t.Errorf("a second Kill changed Err to %v", err)
	}
}

// A session killed before it is served ends as soon as Serve runs.
func TestKillBeforeServe(t *testing.T) {
	leakCheck(t)
	dev, _ := pipeDevice(t, false, Peer{})
	s := New(6, dev, config(t, newCatalog(t)))
	s.Kill("early")
	run(t, s)
	waitDone(t, s)
	if s.Reason() != ReasonKilled {
		t.Errorf("Reason() = %q", s.Reason())
	}
}
