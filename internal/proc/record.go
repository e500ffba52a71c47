package proc

import (
	"bufio"
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

	"github.com/snodod/snodod/internal/atomicfile"
)

// A daemon records the process groups it starts, hosted servers' and exec
// tools' runs alike, so that the next daemon can end what a crash (kill
// -9, the OOM killer) left behind: Pdeathsig kills a group's leader with
// the daemon, not what the leader started (docs/upstreams.md §4).
//
// Each process keeps a record of its own, BASE.PID, so that the two
// daemons of an upgrade, which overlap, never write one file; the next
// daemon ends the groups of every record whose process no longer runs
// (KillOrphans). A record is a small text file, rewritten whole (to a
// temporary file, then renamed) on every change, so a crash leaves the old
// or the new one:
//
//	snodod-groups 2
//	boot <boot id>
//	daemon <pid> <start time>
//	<pid> <start time>
//	…
//
// Start times count clock ticks since boot, so records of another boot are
// void. The daemon line names the process whose record it is, and the
// prefix of the markers (MarkerEnv) its children carry, by which the
// processes of its groups that left them are found. Records of version 1,
// one file BASE without a daemon line, are read too (a daemon of an
// earlier version).
const (
	recordHeader   = "snodod-groups 2"
	recordHeaderV1 = "snodod-groups 1"
)

// GroupRecord is this process's record of the process groups it started.
// Its methods may be called from any goroutine, on a nil record too (they
// then record nothing).
type GroupRecord struct {
	path string

	mu     sync.Mutex
	groups map[recordedGroup]struct{}
}

type recordedGroup struct {
	pid       int
	startTime uint64
}

// OpenGroupRecord opens this process's record of base: the file base.PID,
// emptied (created with mode 0600, its directory with mode 0700). A file
// of that name left by a process that had this pid before is ended first,
// as KillOrphans would. Call KillOrphans on base once the daemon owns its
// sockets.
func OpenGroupRecord(base string, log *slog.Logger) (*GroupRecord, error) {
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return nil, fmt.Errorf("open group record: %w", err)
	}
	path := base + "." + strconv.Itoa(os.Getpid())
	if _, err := killRecord(path, logger(log)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger(log).Warn("group record: cannot read the record this one replaces", "path", path, "err", err)
	}
	r := &GroupRecord{path: path, groups: make(map[recordedGroup]struct{})}
	if err := r.save(); err != nil {
		return nil, err
	}
	return r, nil
}

// Path is the record's file.
func (r *GroupRecord) Path() string { return r.path }

// Add records g (its pid and start time).
func (r *GroupRecord) Add(g *Group) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[recordedGroup{g.PID(), g.StartTime()}] = struct{}{}
	return r.save()
}

// Remove forgets g.
func (r *GroupRecord) Remove(g *Group) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, recordedGroup{g.PID(), g.StartTime()})
	return r.save()
}

// Close removes the record when it holds no group (every group it had
// ended); one still recorded stays, for the next daemon. Adding to the
// record after Close records again.
func (r *GroupRecord) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.groups) > 0 {
		return nil
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove group record: %w", err)
	}
	return nil
}

// save writes the record; r.mu is held (or r is not shared yet).
func (r *GroupRecord) save() error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nboot %s\ndaemon %s\n", recordHeader, BootID(), strings.Replace(selfMarker(), ".", " ", 1))
	lines := make([]string, 0, len(r.groups))
	for g := range r.groups {
		lines = append(lines, fmt.Sprintf("%d %d\n", g.pid, g.startTime))
	}
	slices.Sort(lines)
	for _, l := range lines {
		b.WriteString(l)
	}
	if err := atomicfile.Write(r.path, []byte(b.String())); err != nil {
		return fmt.Errorf("write group record: %w", err)
	}
	return nil
}

// KillOrphans ends (SIGKILL) what the records of base list that still
// runs, for every record whose process no longer runs (base.PID, and base
// itself, a record of version 1), and removes those records; it returns
// how many groups it killed. The record of a process that runs (a daemon
// being upgraded, or this one) is left alone. No record is no orphans.
//
// A group is the recorded one when its leader is still the recorded
// process (same pid AND start time, so a reused pid is never killed), or,
// since the parent-death signal usually killed the leader with the daemon,
// when the leader is gone and processes remain in the group that started
// no earlier than it did: while a group has members its id cannot be
// given to a new process, so such members are the leader's descendants.
// (A reused pid that became the leader of a new group, which then lost
// its leader too, before this runs, is the one case it cannot tell apart.)
// Besides the groups, every process that carries the dead daemon's marker
// (MarkerEnv) is killed with its descendants: those that left their group
// with setsid.
func KillOrphans(base string, log *slog.Logger) (int, error) {
	log = logger(log)
	paths, err := filepath.Glob(globEscape(base) + ".*")
	if err != nil {
		return 0, fmt.Errorf("kill orphans: %w", err)
	}
	paths = slices.DeleteFunc(paths, func(p string) bool {
		pid, err := strconv.Atoi(strings.TrimPrefix(p, base+"."))
		return err != nil || pid <= 0 // a temporary file of a write
	})
	paths = append(paths, base)
	killed := 0
	var errs []error
	for _, path := range paths {
		n, err := killRecord(path, log)
		killed += n
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return killed, errors.Join(errs...)
}

// globEscape escapes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// killRecord ends what the record at path lists and removes it, unless
// its process still runs.
func killRecord(path string, log *slog.Logger) (int, error) {
	rec, err := readRecord(path)
	if err != nil {
		return 0, err
	}
	if rec.daemonPID != 0 {
		if p, err := ReadProcess(rec.daemonPID); err == nil && p.StartTime == rec.daemonStart && !p.Exited() {
			return 0, nil // a daemon that runs: its record is its own
		}
	}
	killed := 0
	if rec.boot != BootID() {
		log.Info("group record is from an earlier boot; nothing to kill", "path", path)
	} else if killed, err = killGroups(rec, log); err != nil {
		return killed, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return killed, fmt.Errorf("remove group record: %w", err)
	}
	return killed, nil
}

// killGroups kills rec's groups and the processes its daemon's markers
// name.
func killGroups(rec record, log *slog.Logger) (int, error) {
	killed := 0
	var all []Process
	for _, g := range rec.groups {
		leader, err := ReadProcess(g.pid)
		switch {
		case err == nil && leader.StartTime != g.startTime:
			continue // the pid was reused: not ours
		case err == nil && !leader.Exited():
			// the recorded leader itself
		default:
			if all == nil {
				if all, err = Processes(); err != nil {
					return killed, fmt.Errorf("kill orphans: %w", err)
				}
			}
			if !hasMembers(all, g) {
				continue
			}
		}
		if err := syscall.Kill(-g.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Warn("cannot kill an orphaned process group", "pgid", g.pid, "err", err)
			continue
		}
		log.Info("killed a process group left by a previous daemon", "pgid", g.pid)
		killed++
	}
	if rec.daemonPID != 0 {
		// Those that left their groups (setsid), found by the daemon's
		// marker wherever they were reparented, with what they started.
		marker := strconv.Itoa(rec.daemonPID) + "." + strconv.FormatUint(rec.daemonStart, 10)
		list := func() []member { return walk(orphansAnywhere(marker, true, rec.daemonStart)) }
		if n := len(list()); n > 0 {
			killRemaining(list)
			log.Info("killed processes that left their groups, left by a previous daemon", "processes", n)
		}
	}
	return killed, nil
}

// hasMembers reports whether a live process other than the leader is in
// g's group and started no earlier than its leader.
func hasMembers(all []Process, g recordedGroup) bool {
	for _, p := range all {
		if p.PGID == g.pid && p.PID != g.pid && !p.Exited() && p.StartTime >= g.startTime {
			return true
		}
	}
	return false
}

// record is a record file read back.
type record struct {
	boot        string
	daemonPID   int
	daemonStart uint64
	groups      []recordedGroup
}

func readRecord(path string) (record, error) {
	var rec record
	f, err := os.Open(path)
	if err != nil {
		return rec, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case n == 1:
			if line != recordHeader && line != recordHeaderV1 {
				return rec, fmt.Errorf("group record %s: not a snodod group record (first line %q); remove it", path, line)
			}
		case strings.HasPrefix(line, "boot "):
			rec.boot = strings.TrimPrefix(line, "boot ")
		case strings.HasPrefix(line, "daemon "):
			pidText, startText, _ := strings.Cut(strings.TrimPrefix(line, "daemon "), " ")
			pid, err1 := strconv.Atoi(pidText)
			st, err2 := strconv.ParseUint(startText, 10, 64)
			if err1 != nil || err2 != nil || pid <= 1 {
				return rec, fmt.Errorf("group record %s line %d: %q is not \"daemon PID STARTTIME\"; remove the file", path, n, line)
			}
			rec.daemonPID, rec.daemonStart = pid, st
		case line == "":
		default:
			pidText, startText, _ := strings.Cut(line, " ")
			pid, err1 := strconv.Atoi(pidText)
			st, err2 := strconv.ParseUint(startText, 10, 64)
			if err1 != nil || err2 != nil || pid <= 1 {
				return rec, fmt.Errorf("group record %s line %d: %q is not \"PID STARTTIME\"; remove the file", path, n, line)
			}
			rec.groups = append(rec.groups, recordedGroup{pid, st})
		}
	}
	return rec, sc.Err()
}

func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
}
