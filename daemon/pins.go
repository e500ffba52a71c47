package daemon

import (
	"fmt"
	"slices"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/session"
)

// approve serves {"op":"approve","name":…,"tool":…}: the pinned or
// quarantined server's held definitions become its approved ones, and
// every view lists them at once (docs/views.md, "Pinned definitions").
// Only the daemon's own uid may: it trusts a server's words for every
// session, daemon.allowed_uids' included.
func (d *Daemon) approve(req control.Request, peer session.Peer) control.Reply {
	if peer.UID != d.uid {
		return control.Reply{Error: fmt.Sprintf("only uid %d, the daemon's, may approve a hosted server's definitions: every session sees them", d.uid)}
	}
	approved, err := d.ups.Approve(req.Name, req.Tool)
	if err != nil {
		return control.Reply{Error: err.Error()}
	}
	r := control.Reply{OK: true}
	if len(approved) > 0 && approved[0] == "" {
		r.Released, approved = true, approved[1:]
	}
	r.Approved = slices.Clip(approved)
	d.log.Info("hosted server approved", "upstream", req.Name, "tools", r.Approved, "quarantine_ended", r.Released, "by_pid", peer.PID)
	return r
}

// diff serves {"op":"diff","name":…}: what the server holds for approval.
func (d *Daemon) diff(req control.Request) control.Reply {
	text, err := d.ups.Diff(req.Name)
	if err != nil {
		return control.Reply{Error: err.Error()}
	}
	return control.Reply{OK: true, Diff: text}
}
