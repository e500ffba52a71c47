package upstream

import (
	"log/slog"

	"github.com/snodod/snodod/internal/proc"
)

// GroupRecord is the file in which a daemon records the process groups of
// its instances, so that its successor can kill what a crash left behind
// (upstreams.md §4). Its methods may be called from any goroutine; one
// daemon owns the file.
type GroupRecord struct{}

// OpenGroupRecord opens (creating it, with its directory) the record at
// path, emptied.
func OpenGroupRecord(path string) (*GroupRecord, error) { panic("not yet") }

// Add records g (its pid and start time).
func (r *GroupRecord) Add(g *proc.Group) error { panic("not yet") }

// Remove forgets g.
func (r *GroupRecord) Remove(g *proc.Group) error { panic("not yet") }

// Close closes the record's file.
func (r *GroupRecord) Close() error { panic("not yet") }

// KillOrphans kills (SIGKILL to the group) every group recorded at path
// whose leader is still the recorded process (same pid AND start time, so
// a reused pid is never killed), and empties the record; it returns how
// many it killed. A missing file is no orphans.
func KillOrphans(path string, log *slog.Logger) (int, error) { panic("not yet") }
