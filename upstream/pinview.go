package upstream

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// What the pins (pin.go) do to the views: the tools they hold are left
// out of every view (view.go asks heldTool and quarantined), the requests
// for them refused (pinRefusal, through startHook), approve and diff.

// Approve approves what hosted server name holds (tool alone, when not
// ""): its pending definitions become its pinned ones, its quarantine
// ends, and every view lists them at once (list_changed). It returns the
// tools approved, "" first when the quarantine ended; none when nothing
// awaited approval.
func (m *Manager) Approve(name, tool string) ([]string, error) {
	u := m.upstream(name)
	if u == nil {
		return nil, m.unknown(name)
	}
	if cfg := u.conf(); !cfg.Pin && !cfg.Quarantine {
		return nil, fmt.Errorf("hosted server %q is not pinned (pin = false) nor quarantined: nothing of it awaits approval", name)
	}
	approved, err := m.pins.approve(name, tool)
	if err != nil {
		return nil, err
	}
	m.refreshViews()
	return approved, nil
}

// Diff describes what hosted server name holds, word by word
// (PinRecord.Diff).
func (m *Manager) Diff(name string) (string, error) {
	if m.upstream(name) == nil {
		return "", m.unknown(name)
	}
	return m.pins.snapshot(name).Diff(), nil
}

// settlePins evaluates every upstream's pins against its current catalog
// (refreshViews calls it first), and records whether anything is held.
func (m *Manager) settlePins(ups []*upstream) {
	blocking := false
	for _, u := range ups {
		cfg := u.conf()
		var st *pinState
		if !cfg.Disabled {
			cat := u.currentCatalog()
			var tools []json.RawMessage
			if cat != nil {
				tools = cat.Tools
			}
			memo := pinMemo{cat: cat, cfg: cfg}
			if cfg.Pin || cfg.Quarantine {
				memo.version = m.pins.version(u.name)
			}
			if memo == u.pinMemo {
				st = u.pin.Load() // nothing changed since the last evaluation
			} else {
				var err error
				st, err = m.pins.evaluate(cfg, tools, cat != nil)
				if err != nil {
					m.log.Warn("pinned definitions: cannot write their record; held tools stay held", "upstream", u.name, "err", err)
				}
				for name, why := range st.heldNew(u.pin.Load()) {
					m.log.Warn("tool held out of every view until approved: its definition "+why, "upstream", u.name, "tool", name,
						"diff", "snodod diff "+u.name, "approve", "snodod approve "+u.name+" "+name)
				}
				if memo.version != 0 {
					memo.version = m.pins.version(u.name) // the evaluation's own write
				}
				u.pinMemo = memo
			}
		}
		u.pin.Store(st)
		blocking = blocking || st.blocks()
	}
	m.pinBlocking.Store(blocking)
}

// pinMemo is what an upstream's pins were last evaluated against: its
// catalog and configuration (both immutable once made) and its record's
// version.
type pinMemo struct {
	cat     *catalog
	cfg     *config.Upstream
	version uint64
}

// heldNew returns what st holds that prev did not, with why ("changed",
// "is new").
func (st *pinState) heldNew(prev *pinState) map[string]string {
	out := map[string]string{}
	if st == nil {
		return out
	}
	for name, why := range st.held {
		if prev == nil || prev.held[name] != why {
			if why == "new" {
				why = "is new"
			}
			out[name] = why
		}
	}
	return out
}

// heldTool reports whether the views leave tool (the server's own name)
// of u out.
func (u *upstream) heldTool(tool string) bool {
	st := u.pin.Load()
	return st != nil && (st.quarantined || st.held[tool] != "")
}

// quarantined reports whether u lists nothing until approved.
func (u *upstream) quarantined() bool {
	st := u.pin.Load()
	return st != nil && st.quarantined
}

// pinChecked are the methods a pinned or quarantined server's state may
// refuse: what reaches a tool, a prompt or a resource.
var pinChecked = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true,
	"resources/subscribe": true, "completion/complete": true}

// pinRefusal is the answer to req, in view ("" the aggregated one), when
// it asks for what the pins hold: a held tool (it changed, or is new), or
// anything of a quarantined server; nil otherwise. A view does not list
// what is held, and its call says why and how to approve it, rather than
// "Unknown tool".
func (m *Manager) pinRefusal(view string, req *server.Request) *protocol.Error {
	if !m.pinBlocking.Load() || !pinChecked[req.Method] {
		return nil
	}
	members, _ := protocol.Members(req.Params)
	name, _ := protocol.String(members["name"])
	var u *upstream
	tool := name
	if view != "" {
		u = m.upstream(view)
	} else if req.Method == "tools/call" || req.Method == "prompts/get" {
		prefix, _, found := strings.Cut(name, "__")
		for _, c := range m.sorted() {
			if found && c.conf().Prefix == prefix {
				u = c
			}
		}
		if u != nil {
			tool = ""
			if st := u.pin.Load(); st != nil {
				for n := range st.held {
					if composeName(prefix, n) == name {
						tool = n
					}
				}
			}
		}
	}
	if u == nil {
		return nil
	}
	if u.quarantined() {
		return &protocol.Error{Code: protocol.CodeInvalidParams, Message: fmt.Sprintf(
			"snodod: hosted server %q is quarantined (quarantine = true) until it is approved: see what it offers with snodod diff %s, approve it with snodod approve %s",
			u.name, u.name, u.name)}
	}
	if req.Method != "tools/call" || tool == "" {
		return nil
	}
	switch u.pin.Load().held[tool] {
	case "changed":
		return &protocol.Error{Code: protocol.CodeInvalidParams, Message: fmt.Sprintf(
			"snodod: tool %q of hosted server %q changed since it was pinned (pin = true): it is held out of every view until it is approved again; see what changed with snodod diff %s, approve it with snodod approve %s %s",
			tool, u.name, u.name, u.name, tool)}
	case "new":
		return &protocol.Error{Code: protocol.CodeInvalidParams, Message: fmt.Sprintf(
			"snodod: tool %q of hosted server %q is new since its tools were pinned (pin_new = \"hold\"): it is held out of every view until it is approved; see it with snodod diff %s, approve it with snodod approve %s %s",
			tool, u.name, u.name, u.name, tool)}
	}
	return nil
}
