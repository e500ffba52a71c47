package upstream

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/snodod/snodod/internal/atomicfile"
)

// aggregatedView is the aggregated view's key in the usage file.
const aggregatedView = "(aggregated)"

// usageFlushDelay is how long after a call its count waits to be
// written: the calls of a burst share one write.
const usageFlushDelay = 2 * time.Second

// usage counts the calls of each tool per view (docs/views.md, "Budgets"),
// kept in <state dir>/usage.json, replaced whole at each write (an
// interrupted write leaves the old file). A budget lists the most used
// tools first. Without a state directory the counts live as long as the
// process. Its methods may be called from any goroutine.
type usage struct {
	path string // "" keeps the counts in memory only
	log  *slog.Logger

	mu      sync.Mutex
	counts  map[string]map[string]uint64 // view → tool → calls
	dirty   bool
	timer   *time.Timer
	failing bool // the last write failed (logged once until one succeeds)
}

// usageFile is the file's form.
type usageFile struct {
	Views map[string]map[string]uint64 `json:"views"`
}

// openUsage reads the counts of dir/usage.json; a missing or unreadable
// file starts from none (an unreadable one is logged, and replaced at
// the next write).
func openUsage(dir string, log *slog.Logger) *usage {
	u := &usage{log: log, counts: map[string]map[string]uint64{}}
	if dir == "" {
		return u
	}
	u.path = filepath.Join(dir, "usage.json")
	b, err := os.ReadFile(u.path)
	if err != nil {
		return u
	}
	var f usageFile
	if err := json.Unmarshal(b, &f); err != nil {
		log.Warn("tool usage counts unreadable; counting from zero", "path", u.path, "err", err)
		return u
	}
	for view, tools := range f.Views {
		if tools != nil {
			u.counts[view] = tools
		}
	}
	return u
}

// add counts one call of tool in view.
func (u *usage) add(view, tool string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.counts[view] == nil {
		u.counts[view] = map[string]uint64{}
	}
	u.counts[view][tool]++
	u.dirty = true
	if u.path != "" && u.timer == nil {
		u.timer = time.AfterFunc(usageFlushDelay, u.flush)
	}
}

// of returns a copy of view's counts.
func (u *usage) of(view string) map[string]uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]uint64, len(u.counts[view]))
	for k, v := range u.counts[view] {
		out[k] = v
	}
	return out
}

// flush writes the counts when they changed since the last write.
func (u *usage) flush() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	if !u.dirty || u.path == "" {
		return
	}
	b, err := json.Marshal(usageFile{Views: u.counts})
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(u.path), 0o700); err == nil {
			err = atomicfile.Write(u.path, b)
		}
	}
	if err != nil {
		if !u.failing {
			u.log.Warn("tool usage counts: cannot write; budgets rank by the counts in memory, and this is logged once until a write succeeds", "path", u.path, "err", err)
		}
		u.failing = true
		return
	}
	u.failing, u.dirty = false, false
}
