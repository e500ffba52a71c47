package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/snodod/snodod/internal/proc"
)

// The record is a small text file, rewritten whole (to a temporary file,
// then renamed) on every change, so a crash leaves the old or the new one:
//
//	snodod-groups 1
//	boot <boot id>
//	<pid> <start time>
//	…
//
// Start times count clock ticks since boot, so records of another boot are
// void.
const recordHeader = "snodod-groups 1"

// GroupRecord is the file in which a daemon records the process groups of
// its instances, so that its successor can kill what a crash left behind
// (docs/upstreams.md §4). Its methods may be called from any goroutine; one
// daemon owns the file.
type GroupRecord struct {
	path string

	mu     sync.Mutex
	groups map[recordedGroup]struct{}
}

type recordedGroup struct {
	pid       int
	startTime uint64
}

// OpenGroupRecord opens the record at path, emptied (creating it, and its
// directory with mode 0700). Call KillOrphans on the path first.
func OpenGroupRecord(path string) (*GroupRecord, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open group record: %w", err)
	}
	r := &GroupRecord{path: path, groups: make(map[recordedGroup]struct{})}
	if err := r.save(); err != nil {
		return nil, err
	}
	return r, nil
}

// Add records g (its pid and start time).
func (r *GroupRecord) Add(g *proc.Group) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[recordedGroup{g.PID(), g.StartTime()}] = struct{}{}
	return r.save()
}

// Remove forgets g.
func (r *GroupRecord) Remove(g *proc.Group) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, recordedGroup{g.PID(), g.StartTime()})
	return r.save()
}

// Close removes nothing and keeps nothing open: every change is already
// on disk. It exists so that the record's owner has one place to end it.
func (r *GroupRecord) Close() error { return nil }

// save writes the record; r.mu is held (or r is not shared yet).
func (r *GroupRecord) save() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nboot %s\n", recordHeader, proc.BootID())
	lines := make([]string, 0, len(r.groups))
	for g := range r.groups {
		lines = append(lines, fmt.Sprintf("%d %d\n", g.pid, g.startTime))
	}
	slices.Sort(lines)
	for _, l := range lines {
		b.WriteString(l)
	}
	if err := writeFileAtomic(r.path, b.Bytes()); err != nil {
		return fmt.Errorf("write group record: %w", err)
	}
	return nil
}

// KillOrphans kills (SIGKILL to the group) every group recorded at path
// that still runs, and empties the record; it returns how many groups it
// killed. A missing file is no orphans.
//
// A group is the recorded one when its leader is still the recorded
// process (same pid AND start time, so a reused pid is never killed), or,
// since the parent-death signal usually killed the leader with the daemon,
// when the leader is gone and processes remain in the group that started
// no earlier than it did: while a group has members its id cannot be
// given to a new process, so such members are the leader's descendants.
// (A reused pid that became the leader of a new group, which then lost
// its leader too, before this runs, is the one case it cannot tell apart.)
func KillOrphans(path string, log *slog.Logger) (int, error) {
	if log == nil {
		log = slog.Default()
	}
	groups, boot, err := readRecord(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	killed := 0
	if boot != proc.BootID() {
		log.Info("group record is from an earlier boot; nothing to kill", "path", path)
		groups = nil
	}
	var all []proc.Process
	for _, g := range groups {
		leader, err := proc.ReadProcess(g.pid)
		switch {
		case err == nil && leader.StartTime != g.startTime:
			continue // the pid was reused: not ours
		case err == nil && !leader.Exited():
			// the recorded leader itself
		default:
			if all == nil {
				if all, err = proc.Processes(); err != nil {
					return killed, fmt.Errorf("kill orphans: %w", err)
				}
			}
			if !hasMembers(all, g) {
				continue
			}
		}
		if err := syscall.Kill(-g.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Warn("cannot kill an orphaned upstream group", "pgid", g.pid, "err", err)
			continue
		}
		log.Info("killed an upstream process group left by a previous daemon", "pgid", g.pid)
		killed++
	}
	if err := writeFileAtomic(path, fmt.Appendf(nil, "%s\nboot %s\n", recordHeader, proc.BootID())); err != nil {
		return killed, fmt.Errorf("write group record: %w", err)
	}
	return killed, nil
}

// hasMembers reports whether a live process other than the leader is in
// g's group and started no earlier than its leader.
func hasMembers(all []proc.Process, g recordedGroup) bool {
	for _, p := range all {
		if p.PGID == g.pid && p.PID != g.pid && !p.Exited() && p.StartTime >= g.startTime {
			return true
		}
	}
	return false
}

func readRecord(path string) (groups []recordedGroup, boot string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case n == 1:
			if line != recordHeader {
				return nil, "", fmt.Errorf("group record %s: not a snodod group record (first line %q); remove it", path, line)
			}
		case strings.HasPrefix(line, "boot "):
			boot = strings.TrimPrefix(line, "boot ")
		case line == "":
		default:
			pidText, startText, _ := strings.Cut(line, " ")
			pid, err1 := strconv.Atoi(pidText)
			st, err2 := strconv.ParseUint(startText, 10, 64)
			if err1 != nil || err2 != nil || pid <= 1 {
				return nil, "", fmt.Errorf("group record %s line %d: %q is not \"PID STARTTIME\"; remove the file", path, n, line)
			}
			groups = append(groups, recordedGroup{pid, st})
		}
	}
	return groups, boot, sc.Err()
}
