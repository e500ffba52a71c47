package daemon

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/daemon/statuspage"
)

// The status page on the admin listener (docs/observability.md, "Status
// page"): daemon/statuspage renders it from what `snodod status` shows,
// the metrics and the log ring; its buttons are the control ops of
// `snodod upstream restart` and `snodod kill`.

// newPage makes the admin listener's status page.
func (d *Daemon) newPage(ac config.Admin, token string) *statuspage.Page {
	return statuspage.New(statuspage.Options{
		Status: d.Status,
		Tools:  d.metrics.Tools,
		Logs:   d.logs.last,
		Restart: func(name string) error {
			r := d.upstreamOp(control.Request{Op: control.OpUpstream, Action: control.ActionRestart, Name: name})
			if !r.OK {
				return errors.New(r.Error)
			}
			return nil
		},
		Kill: func(id uint64) error {
			r := d.endSession(id, "by the status page", "status page")
			if !r.OK {
				return errors.New(r.Error)
			}
			return nil
		},
		Token:        token,
		MaxViewers:   ac.MaxViewers,
		WriteTimeout: ac.ViewerWriteTimeout,
		Log:          d.log,
	})
}

// last returns the newest n lines of the ring, oldest first, without
// their line ends.
func (r *logRing) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := r.lines[r.head:]
	held = held[max(0, len(held)-n):]
	out := make([]string, len(held))
	for i, l := range held {
		out[i] = strings.TrimRight(string(l), "\n")
	}
	return out
}

// endSession ends session id, as `snodod kill` does, for reason (logged
// as by).
func (d *Daemon) endSession(id uint64, reason, by string) control.Reply {
	s := d.sessions.session(id)
	if s == nil {
		return control.Reply{Error: fmt.Sprintf("no session %d; 'snodod status' lists the sessions", id)}
	}
	d.log.Info("killing a session", "session", id, "by", by)
	s.Kill(reason)
	select {
	case <-s.Done():
		return control.Reply{OK: true, Session: id}
	case <-time.After(killWait):
		return control.Reply{Error: fmt.Sprintf("session %d is still ending after %v", id, killWait)}
	}
}
