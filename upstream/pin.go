package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/atomicfile"
)

// Pinned definitions (docs/views.md, "Pinned definitions"): the
// protection against a hosted server that changes what its tools say
// after the user trusted it (a "rug pull"). A server with pin = true has
// each tool definition it first lists recorded, by hash and whole, in
// StateDir/pins/<name>.json; a later listing whose definition of a tool
// differs, or (pin_new = "hold") a tool first listed later, holds that
// tool out of every view until `snodod approve NAME [TOOL]`. A server
// with quarantine = true lists nothing until it is approved once. The
// record is the daemon's while it runs (approve and diff reach it through
// the control socket); without a daemon the CLI reads and approves the
// file itself (ApprovePins, LoadPins).

// PinRecord is one hosted server's pins, as StateDir/pins/<name>.json
// holds them.
type PinRecord struct {
	Server string `json:"server"`
	// Pinned is when the first listing was recorded (zero: not yet).
	Pinned time.Time `json:"pinned,omitzero"`
	// Quarantined is set while the server awaits its first approval
	// (quarantine = true); Approved is when it got it.
	Quarantined bool      `json:"quarantined,omitempty"`
	Approved    time.Time `json:"approved,omitzero"`
	// Tools are the approved definitions, by the server's own tool name;
	// Pending those listed since that differ (or are new), awaiting
	// approval.
	Tools   map[string]PinnedTool `json:"tools"`
	Pending map[string]PinnedTool `json:"pending,omitempty"`
}

// PinnedTool is one tool definition: its hash (of Definition) and the
// fields that are pinned (canonicalTool), so that diff can show what
// changed.
type PinnedTool struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	Seen       time.Time       `json:"seen"`
}

// pinnedFields are the members of a tool definition a pin covers.
var pinnedFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// canonicalTool is def's pinned members as canonical JSON: objects' keys
// sorted at every depth, no insignificant space, numbers as written, no
// HTML escaping; and the SHA-256 of those bytes, in hex. Two definitions
// that differ only in key order or spacing have the same hash.
func canonicalTool(def json.RawMessage) (canonical json.RawMessage, hash string, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(def, &members); err != nil {
		return nil, "", err
	}
	picked := map[string]any{}
	for _, f := range pinnedFields {
		raw, ok := members[f]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, "", err
		}
		picked[f] = v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(picked); err != nil { // maps are written with sorted keys
		return nil, "", err
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	sum := sha256.Sum256(out)
	return out, hex.EncodeToString(sum[:]), nil
}

// pinState is what the pins make of an upstream's current catalog: the
// tools held out of every view, by the server's own name ("changed" or
// "new"), and whether the whole server is quarantined.
type pinState struct {
	held        map[string]string
	quarantined bool
}

func (p *pinState) blocks() bool { return p != nil && (p.quarantined || len(p.held) > 0) }

// pins keeps the records of the pinned servers; "" dir keeps them in
// memory only. Its methods may be called from any goroutine.
//
// The file is read again whenever it is not as this process left it (its
// size and modification time): another process of the same user and
// state directory (snodod stdio, config check, an approve that found no
// daemon) may have written it, and an evaluation must not write back a
// record older than that.
type pins struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex
	// records are loaded at a server's first evaluation; stamps are their
	// files' as last read or written.
	records map[string]*PinRecord
	stamps  map[string]fileStamp
	// versions count each record's changes (loaded, written, approved),
	// so that a refresh that finds the same catalog, configuration and
	// version need not evaluate again (settlePins).
	versions map[string]uint64
}

// version returns name's record's version, reading the file again first
// when another process wrote it.
func (p *pins) version(name string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recordLocked(name)
	return p.versions[name]
}

// bumpLocked counts a change of name's record; p.mu is held.
func (p *pins) bumpLocked(name string) {
	if p.versions == nil {
		p.versions = map[string]uint64{}
	}
	p.versions[name]++
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func (p *pins) stamp(name string) fileStamp {
	if p.dir == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(pinPath(p.dir, name))
	if err != nil {
		return fileStamp{size: -1}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}
}

// saveLocked writes rec and notes its file's stamp; p.mu is held.
func (p *pins) saveLocked(rec *PinRecord) error {
	err := savePins(p.dir, rec)
	if p.stamps == nil {
		p.stamps = map[string]fileStamp{}
	}
	p.stamps[rec.Server] = p.stamp(rec.Server)
	p.bumpLocked(rec.Server)
	return err
}

func pinPath(dir, name string) string {
	return filepath.Join(dir, "pins", safeName(name)+".json")
}

// safeName is a server's name as a file name.
func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, name)
}

// LoadPins reads the record of hosted server name from stateDir; a
// server never pinned has an empty record.
func LoadPins(stateDir, name string) (*PinRecord, error) {
	rec := &PinRecord{Server: name, Tools: map[string]PinnedTool{}}
	if stateDir == "" {
		return rec, nil
	}
	b, err := os.ReadFile(pinPath(stateDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("%s: %w", pinPath(stateDir, name), err)
	}
	if rec.Tools == nil {
		rec.Tools = map[string]PinnedTool{}
	}
	return rec, nil
}

func savePins(stateDir string, rec *PinRecord) error {
	if stateDir == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(stateDir, "pins"), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(pinPath(stateDir, rec.Server), append(b, '\n'))
}

// recordLocked returns name's record, loading it at first and whenever
// its file changed; p.mu is held.
func (p *pins) recordLocked(name string) *PinRecord {
	stamp := p.stamp(name)
	if rec := p.records[name]; rec != nil && p.stamps[name] == stamp {
		return rec
	}
	if p.stamps == nil {
		p.stamps = map[string]fileStamp{}
	}
	p.stamps[name] = stamp
	p.bumpLocked(name)
	rec, err := LoadPins(p.dir, name)
	if err != nil {
		// An unreadable record is not taken for a first listing, which
		// would trust whatever the server lists now: every tool is new.
		p.log.Warn("pinned definitions: the record is unreadable; every tool of the server is taken as new (held with pin_new = \"hold\") and the record is written anew",
			"upstream", name, "err", err)
		rec = &PinRecord{Server: name, Tools: map[string]PinnedTool{}, Pinned: time.Now()}
	}
	if p.records == nil {
		p.records = map[string]*PinRecord{}
	}
	p.records[name] = rec
	return rec
}

// evaluate compares tools, an upstream's current listing (nil: none yet),
// with its record per cfg, records what is new (the first listing, the
// definitions awaiting approval), and returns what it holds; save
// receives the failure of a write.
func (p *pins) evaluate(cfg *config.Upstream, tools []json.RawMessage, listed bool) (*pinState, error) {
	if !cfg.Pin && !cfg.Quarantine {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(cfg.Name)
	before, _ := json.Marshal(rec)
	st := &pinState{held: map[string]string{}}
	now := time.Now()
	if cfg.Quarantine && rec.Approved.IsZero() {
		st.quarantined, rec.Quarantined = true, true
	}
	first := rec.Pinned.IsZero()
	seen := map[string]bool{}
	for _, def := range tools {
		name, ok := itemKey(def, "name")
		if !ok {
			continue
		}
		canon, hash, err := canonicalTool(def)
		if err != nil {
			continue
		}
		seen[name] = true
		entry := PinnedTool{Hash: hash, Definition: canon, Seen: now}
		pinned, known := rec.Tools[name]
		switch {
		case st.quarantined:
			// Nothing is listed: what it would list awaits the approval.
		case !cfg.Pin:
			continue
		case first:
			rec.Tools[name] = entry
			continue
		case known && pinned.Hash == hash:
			delete(rec.Pending, name) // back to what was approved
			continue
		case known:
			st.held[name] = "changed"
		case cfg.PinNew == "allow":
			rec.Tools[name] = entry
			continue
		default:
			st.held[name] = "new"
		}
		if rec.Pending == nil {
			rec.Pending = map[string]PinnedTool{}
		}
		if old, ok := rec.Pending[name]; !ok || old.Hash != hash {
			rec.Pending[name] = entry
		}
	}
	if listed {
		for name := range rec.Pending {
			if !seen[name] {
				delete(rec.Pending, name) // no longer listed: nothing to approve
			}
		}
		if first && cfg.Pin && !st.quarantined {
			rec.Pinned = now
		}
	}
	if after, _ := json.Marshal(rec); !bytes.Equal(before, after) {
		return st, p.saveLocked(rec)
	}
	return st, nil
}

// approve moves name's pending definitions (all of them, or tool's) to
// its approved ones, and ends its quarantine; it returns the tools
// approved, and "" first when the quarantine ended.
func (p *pins) approve(name, tool string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.recordLocked(name)
	approved, err := approveRecord(rec, tool)
	if err != nil {
		return nil, err
	}
	return approved, p.saveLocked(rec)
}

// approveRecord is approve on one record.
func approveRecord(rec *PinRecord, tool string) ([]string, error) {
	var approved []string
	now := time.Now()
	if rec.Quarantined && rec.Approved.IsZero() {
		if tool != "" {
			return nil, fmt.Errorf("hosted server %q is quarantined: approve it whole, with snodod approve %s", rec.Server, rec.Server)
		}
		rec.Approved = now
		approved = append(approved, "")
	}
	names := slices.Sorted(maps.Keys(rec.Pending))
	if tool != "" {
		if _, ok := rec.Pending[tool]; !ok {
			return nil, fmt.Errorf("tool %q of hosted server %q awaits no approval (awaiting: %s)", tool, rec.Server, orNone(names))
		}
		names = []string{tool}
	}
	for _, n := range names {
		rec.Tools[n] = rec.Pending[n]
		delete(rec.Pending, n)
		approved = append(approved, n)
	}
	if rec.Pinned.IsZero() && len(approved) > 0 {
		rec.Pinned = now // the quarantine's approval is the first listing's
	}
	return approved, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// snapshot returns a copy of name's record.
func (p *pins) snapshot(name string) *PinRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := *p.recordLocked(name)
	rec.Tools, rec.Pending = maps.Clone(rec.Tools), maps.Clone(rec.Pending)
	return &rec
}

// ApprovePins approves, in the record of stateDir, the pending definitions
// of hosted server name (tool's alone, when not ""), and ends its
// quarantine, for a machine where no daemon runs: the daemon reads the
// record when it starts. It returns what approve returns.
func ApprovePins(stateDir, name, tool string) ([]string, error) {
	rec, err := LoadPins(stateDir, name)
	if err != nil {
		return nil, err
	}
	approved, err := approveRecord(rec, tool)
	if err != nil || len(approved) == 0 {
		return approved, err
	}
	return approved, savePins(stateDir, rec)
}
