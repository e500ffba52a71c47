package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/snodod/snodod/transport/stdio"
)

// Why a session ended, as its one end-of-session log line says it.
const (
	ReasonEOF           = "eof"                  // input ended (a pipe or socket closed)
	ReasonHangup        = "hangup"               // a terminal hung up (its other side closed)
	ReasonWriteTimeout  = "write timeout"        // the client stopped reading
	ReasonWriteFailed   = "write failed"         // the device refused a write
	ReasonKilled        = "killed"               // Kill: `snodod kill`, or the connect process gone
	ReasonDrained       = "drained"              // Serve's ctx ended: the daemon's drain
	ReasonRestartBudget = "restart budget spent" // failed more than RestartIntensity times
	ReasonInvalid       = "invalid configuration"
	ReasonHandedOver    = "handed over" // continued by another process: an upgrade
)

// Kill ends the session without the shutdown grace: its requests are
// cancelled (each answered "Session closed by server"), then the device is
// closed and a terminal's settings restored. why says who or what killed
// it; Err then matches stdio.ErrKilled and says why. Kill returns at once
// (Done is closed when the session has ended); it does nothing to a session
// that has ended, and a session not yet served ends as soon as Serve runs.
func (s *Session) Kill(why string) {
	cause := fmt.Errorf("%w: %s", stdio.ErrKilled, why)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.killed != nil || s.ended {
		return
	}
	s.killed = cause
	if s.cancel != nil {
		s.cancel(cause)
	}
}

// Reason says why the session ended, one of the Reason constants; "" while
// it runs.
func (s *Session) Reason() string {
	s.mu.Lock()
	ended, err, drained, moved := s.ended, s.err, s.drained, s.moved
	s.mu.Unlock()
	var out *stdio.OutputError
	switch {
	case !ended:
		return ""
	case moved:
		return ReasonHandedOver
	case errors.Is(err, stdio.ErrKilled):
		return ReasonKilled
	case errors.Is(err, ErrTooManyFailures):
		return ReasonRestartBudget
	case errors.Is(err, stdio.ErrWriteTimeout):
		return ReasonWriteTimeout
	case errors.As(err, &out):
		return ReasonWriteFailed
	case err != nil:
		return ReasonInvalid
	case drained:
		return ReasonDrained
	case s.dev.Kind() == KindPTY:
		// A raw terminal has no end-of-file character: its input ends
		// only when it hangs up.
		return ReasonHangup
	}
	return ReasonEOF
}

// logEnd writes the session's one end-of-session line: what it served,
// for how long, and why it ended.
func (s *Session) logEnd() {
	reason := s.Reason()
	attrs := []any{
		"kind", s.dev.Kind(), "peer_pid", s.dev.Peer().PID,
		"duration", time.Since(s.started).Round(time.Millisecond).String(),
		"requests", s.counters.Requests(), "restarts", s.restarts.Load(),
		"bytes_in", s.bytesIn(), "bytes_out", s.dev.BytesOut(),
		"reason", reason,
	}
	if err := s.Err(); err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	if reason == ReasonHandedOver {
		s.log.Info("session handed over", attrs...)
		return
	}
	s.log.Info("session ended", attrs...)
}
