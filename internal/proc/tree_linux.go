package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A group is stopped by its whole tree, not only its process group: a
// process that calls setsid() (gpg-agent, a language server, nohup and
// `setsid cmd &` in a shell) leaves its group and its session, and
// kill(-pgid) no longer reaches it (docs/architecture.md §6). The tree is found
// in /proc:
//
//   - the leader's descendants while it runs, from parent to child
//     (/proc/PID/task/TID/children);
//   - and the processes that left the tree because their parent exited
//     before them (a double fork; a shell that started `setsid cmd &` and
//     ended), which are reparented to the daemon, a child subreaper
//     (Subreaper): every child Start makes carries its group's marker in
//     its environment (MarkerEnv), which its descendants inherit, so an
//     orphan is told to be the group's by reading its /proc/PID/environ.
//     Where this process is not a subreaper, orphans go to init or another
//     subreaper, and every process that started after the leader is looked
//     at.
//
// What no walk of /proc can find is a process whose parent exited and that
// also cleared its environment (env -i, a daemon that rebuilds its own):
// a PID namespace or a cgroup per group would (the sandbox issue). Each
// process is signalled through a pidfd opened after its start time was
// checked, so a pid that was reused meanwhile is never hit.

// MarkerEnv is the variable that Start adds to every child's environment:
// the group it belongs to, "DAEMON.N" where DAEMON names this process
// (its pid and start time, as a GroupRecord does).
const MarkerEnv = "SNODOD_GROUP"

var (
	markerSeq  atomic.Uint64
	selfMarker = sync.OnceValue(func() string {
		st, _ := StartTime(os.Getpid())
		return strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(st, 10)
	})
)

// newMarker returns the marker of a new group.
func newMarker() string {
	return selfMarker() + "." + strconv.FormatUint(markerSeq.Add(1), 10)
}

// withMarker returns env (os.Environ() when nil, as exec.Cmd reads it)
// with MarkerEnv set to marker.
func withMarker(env []string, marker string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if len(kv) <= len(MarkerEnv) || kv[:len(MarkerEnv)+1] != MarkerEnv+"=" {
			out = append(out, kv)
		}
	}
	return append(out, MarkerEnv+"="+marker)
}

// marked reports whether pid's environment holds MarkerEnv with a value
// that is want, or starts with want and a dot when prefix is set. The
// environment is read whole (readEnviron): a process in execve reads empty
// or cut short for a moment, and the marker, last in the environment Start
// gives, is the first thing lost.
func marked(pid int, want string, prefix bool) bool {
	key := []byte(MarkerEnv + "=")
	for kv := range bytes.SplitSeq(readEnviron(pid), []byte{0}) {
		v, ok := bytes.CutPrefix(kv, key)
		if !ok {
			continue
		}
		if prefix {
			return bytes.HasPrefix(v, []byte(want+"."))
		}
		return string(v) == want
	}
	return false
}

// environSettle bounds how long readEnviron waits for a process in execve
// to have its environment again.
const environSettle = 100 * time.Millisecond

// readEnviron returns pid's environment (/proc/PID/environ) whole. While a
// process execs there is a moment, from the switch to its new program's
// memory until the kernel has laid out its stack, when the file reads
// empty or stops short. So a read is kept only when /proc/PID/stat, read
// after it, shows the program laid out (its start_code is set last) and
// the environment's bounds of the length read; otherwise it is read again
// while the process lives, for up to environSettle (then the last read is
// returned). It returns nil for a process that is gone, has exited, is a
// kernel thread (no environment) or cannot be read.
func readEnviron(pid int) []byte {
	dir := "/proc/" + strconv.Itoa(pid)
	var first uint64 // the start time at the first look
	delay := 50 * time.Microsecond
	for i, deadline := 0, time.Now().Add(environSettle); ; i++ {
		b, err := os.ReadFile(dir + "/environ")
		if err != nil {
			return nil
		}
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			return nil
		}
		e, err := parseEnvironStat(stat)
		switch {
		case err != nil:
			return b // a kernel without the bounds: as read
		case e.kthread || e.state == 'Z' || e.state == 'X':
			return nil
		case i == 0:
			first = e.startTime
		case e.startTime != first:
			return nil // another process has the pid now
		}
		if e.startCode != 0 && uint64(len(b)) == e.envEnd-e.envStart {
			return b
		}
		if time.Now().After(deadline) {
			return b
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// environStat is what readEnviron needs of /proc/PID/stat.
type environStat struct {
	state     byte
	kthread   bool   // flags (field 9) hold PF_KTHREAD
	startTime uint64 // field 22
	// startCode (field 26) is 0 until an exec has laid out the program;
	// envStart and envEnd (fields 50 and 51, Linux 3.5) bound the
	// environment.
	startCode, envStart, envEnd uint64
}

// parseEnvironStat reads environStat from a /proc/PID/stat line, counting
// fields from the command name's last ')' as parseStat does.
func parseEnvironStat(b []byte) (environStat, error) {
	const pfKthread = 0x00200000
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return environStat{}, errors.New("parse /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 49 {
		return environStat{}, errors.New("parse /proc stat: no environment bounds")
	}
	var e environStat
	var errs [5]error
	var flags uint64
	e.state = f[0][0]
	flags, errs[0] = strconv.ParseUint(string(f[6]), 10, 64)
	e.startTime, errs[1] = strconv.ParseUint(string(f[19]), 10, 64)
	e.startCode, errs[2] = strconv.ParseUint(string(f[23]), 10, 64)
	e.envStart, errs[3] = strconv.ParseUint(string(f[47]), 10, 64)
	e.envEnd, errs[4] = strconv.ParseUint(string(f[48]), 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return environStat{}, fmt.Errorf("parse /proc stat: %w", err)
	}
	e.kthread = flags&pfKthread != 0
	return e, nil
}

// member is one process of a tree, named by pid and start time.
type member struct {
	pid   int
	start uint64
}

// walk returns roots and their descendants that are alive (not exited),
// each once.
func walk(roots []member) []member {
	seen := map[int]bool{}
	var out []member
	for len(roots) > 0 {
		m := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[m.pid] {
			continue
		}
		seen[m.pid] = true
		p, err := ReadProcess(m.pid)
		if err != nil || p.StartTime != m.start {
			continue // gone, or another process now
		}
		if !p.Exited() {
			out = append(out, m)
		}
		for _, c := range childrenOf(m.pid) {
			if st, err := StartTime(c); err == nil && !seen[c] {
				roots = append(roots, member{c, st})
			}
		}
	}
	return out
}

// orphans returns the live processes carrying marker (exactly, or as a
// prefix when prefix is set) that no longer descend from their group's
// leader: children of this process that it did not start when it is a
// subreaper, otherwise every process started at or after since.
func orphans(marker string, prefix bool, since uint64) []member {
	var out []member
	if IsSubreaper() {
		for _, pid := range ownChildren() {
			if registered(pid) {
				continue
			}
			if p, err := ReadProcess(pid); err == nil && !p.Exited() && marked(pid, marker, prefix) {
				out = append(out, member{pid, p.StartTime})
			}
		}
		return out
	}
	return orphansAnywhere(marker, prefix, since)
}

// orphansAnywhere is orphans looked for among every process started at or
// after since, wherever it was reparented (init, another subreaper, or a
// daemon that has died).
func orphansAnywhere(marker string, prefix bool, since uint64) []member {
	all, _ := Processes()
	self := os.Getpid()
	var out []member
	for _, p := range all {
		if p.PID != self && p.StartTime >= since && !p.Exited() && marked(p.PID, marker, prefix) {
			out = append(out, member{p.PID, p.StartTime})
		}
	}
	return out
}

// signal sends sig to m unless m's pid now names another process.
func (m member) signal(sig syscall.Signal) {
	fd, err := unix.PidfdOpen(m.pid, 0)
	if errors.Is(err, syscall.ENOSYS) {
		// A kernel before 5.3: the start time is checked just before.
		if st, err := StartTime(m.pid); err == nil && st == m.start {
			_ = syscall.Kill(m.pid, sig)
		}
		return
	}
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	if st, err := StartTime(m.pid); err != nil || st != m.start {
		return // the pidfd names the process that has the pid now: not ours
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
}

// tree returns the live processes of g outside its process group's
// leader: the leader's descendants (while it runs) and the orphans that
// carry its marker, with their descendants.
func (g *Group) tree() []member {
	var roots []member
	if g.adopted {
		// Not this process's children: its orphans went to init or
		// another subreaper. The leader carries the marker too.
		for _, m := range orphansAnywhere(g.marker, false, g.startTime) {
			if m.pid != g.pid {
				roots = append(roots, m)
			}
		}
	} else {
		roots = orphans(g.marker, false, g.startTime)
	}
	if p, err := ReadProcess(g.pid); err == nil && p.StartTime == g.startTime && !p.Exited() {
		for _, c := range childrenOf(g.pid) {
			if st, err := StartTime(c); err == nil {
				roots = append(roots, member{c, st})
			}
		}
	}
	return walk(roots)
}

// signalTree sends sig to every process of g's tree (tree).
func (g *Group) signalTree(sig syscall.Signal) {
	for _, m := range g.tree() {
		m.signal(sig)
	}
}

// killTree kills (SIGKILL) what is left of g's tree once its leader has
// exited, again and again while processes remain: a process killed while
// it forks may leave a child that is reparented only once it has died.
// It gives up after about two seconds (a process stuck in the kernel).
func (g *Group) killTree() {
	killRemaining(func() []member { return g.tree() })
}

// killRemaining kills what list returns until it returns nothing, within
// about two seconds.
func killRemaining(list func() []member) {
	delay := time.Millisecond
	for deadline := time.Now().Add(2 * time.Second); ; {
		left := list()
		if len(left) == 0 || time.Now().After(deadline) {
			return
		}
		for _, m := range left {
			m.signal(syscall.SIGKILL)
		}
		time.Sleep(delay)
		delay = min(2*delay, 100*time.Millisecond)
	}
}
