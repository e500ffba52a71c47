package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// launcherArg is the hidden first argument of the launcher mode. No user
// types it; the launcher also checks its descriptors before trusting them.
const launcherArg = "__snodod_sandbox_launcher__"

// launcherPath is the binary re-executed as the launcher: the running one,
// whatever its file became since (an upgrade replaces it; the kernel keeps
// the inode). A variable only so that the benchmark can time the snodod
// binary's start rather than the test binary's.
var launcherPath = "/proc/self/exe"

// reportTimeout bounds Started's wait for the launcher's report: a launch
// is a few stats and mounts, so this only ends a wedged one.
const reportTimeout = 30 * time.Second

// namespaces says which namespaces a child was cloned into.
type namespaces struct {
	User  bool `json:"user,omitempty"`
	Mount bool `json:"mount,omitempty"`
	PID   bool `json:"pid,omitempty"`
	Net   bool `json:"net,omitempty"`
}

func (n namespaces) cloneflags() uintptr {
	var f uintptr
	if n.User {
		f |= unix.CLONE_NEWUSER
	}
	if n.Mount {
		f |= unix.CLONE_NEWNS
	}
	if n.PID {
		f |= unix.CLONE_NEWPID
	}
	if n.Net {
		f |= unix.CLONE_NEWNET
	}
	return f
}

// plan is what the launcher gets on its memfd: everything resolved, so
// that it only applies.
type plan struct {
	Policy Policy   `json:"policy"`
	Path   string   `json:"path"` // the command, absolute
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Dir    string   `json:"dir,omitempty"`
	Grants []Grant  `json:"grants"` // without their Why: the launcher does not report them
	// Seccomp is the filter to load, assembled here once per deny list.
	Seccomp *seccompFilter `json:"seccomp,omitempty"`
	// Asked is what Wrap asked the kernel for; Host the daemon's own
	// namespaces (inode numbers), so the launcher can tell what it got
	// even when a caller dropped the clone flags.
	Asked namespaces        `json:"asked"`
	Host  map[string]uint64 `json:"host"`
}

// Launch is one wrapped command: the descriptors the launcher reports on,
// and what it reported. Its methods are not safe for concurrent use.
type Launch struct {
	level  Level
	memfd  *os.File // the plan; the daemon's copy is closed by Started
	child  *os.File // the report pipe's write end, the child's
	report *os.File // the report pipe's read end
	reader *bufio.Reader
	init   bool // the launcher stays as the server's init and reports its exit
	grants []Grant
}

// Wrap rewrites cmd so that it starts through the launcher under p, and
// returns the Launch to read the launcher's report from. cmd's Stdin,
// Stdout, Stderr, ExtraFiles and SysProcAttr (process group, parent-death
// signal) are kept; its Path, Args, Env and Dir move into the plan, and its
// command is resolved on the child's PATH (cmd.Env's, else the daemon's).
// Under Off, cmd is left as it is.
//
// After Wrap, the caller starts cmd, then calls Started (or Close when the
// start failed) exactly once: until then the daemon holds the child's ends
// of the plan and report descriptors.
func Wrap(cmd *exec.Cmd, p Policy) (*Launch, error) {
	return wrap(cmd, p, Probe)
}

// wrap is Wrap on the kernel probe says (tests pretend a poorer one).
func wrap(cmd *exec.Cmd, p Policy, probe func() Kernel) (*Launch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Level == Off {
		return &Launch{level: Off}, nil
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	argv := append([]string(nil), cmd.Args...)
	if len(argv) == 0 {
		argv = []string{cmd.Path}
	}
	name := argv[0]
	if filepath.IsAbs(cmd.Path) && cmd.Err == nil {
		name = cmd.Path
	}
	path, grants, err := resolve(p, append([]string{name}, argv[1:]...), env, cmd.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.Home, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: private home: %w", err)
	}
	asked := probe().namespacesFor(p)
	bare := make([]Grant, len(grants))
	for i, g := range grants {
		bare[i] = Grant{Path: g.Path, Write: g.Write}
	}
	pl := plan{Policy: p, Path: path, Argv: argv, Env: env, Dir: cmd.Dir, Grants: bare, Asked: asked, Host: hostNamespaces(), Seccomp: filterFor(p.seccomp())}
	pl.Policy.Seccomp = nil // in the filter
	memfd, err := writePlan(pl)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		memfd.Close()
		return nil, fmt.Errorf("sandbox: report pipe: %w", err)
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, memfd, w)
	cmd.Path = launcherPath
	cmd.Args = []string{"snodod-sandbox", launcherArg, "run", strconv.Itoa(fd), strconv.Itoa(fd + 1)}
	cmd.Env = []string{}
	cmd.Dir = ""
	cmd.Err = nil
	setNamespaces(cmd, asked)
	return &Launch{level: p.Level, memfd: memfd, child: w, report: r, init: asked.PID, grants: grants}, nil
}

// setNamespaces adds the clone flags and identity maps of asked to cmd's
// SysProcAttr. Unprivileged, the launcher keeps the capabilities it needs
// for its mounts and loopback across its own exec as ambient ones, and
// drops every capability before the server starts.
func setNamespaces(cmd *exec.Cmd, asked namespaces) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	a.Cloneflags |= asked.cloneflags()
	if !asked.User {
		return
	}
	uid, gid := os.Getuid(), os.Getgid()
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = uid == 0
	if uid != 0 {
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP}
	}
}

// writePlan puts pl in a sealed memfd.
func writePlan(pl plan) (*os.File, error) {
	b, err := json.Marshal(pl)
	if err != nil {
		return nil, fmt.Errorf("sandbox: plan: %w", err)
	}
	fd, err := unix.MemfdCreate("snodod-sandbox-plan", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("sandbox: plan memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "snodod-sandbox-plan")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: plan memfd: %w", err)
	}
	_, _ = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	return f, nil
}

// hostNamespaces reads this process's namespace inodes.
func hostNamespaces() map[string]uint64 {
	m := make(map[string]uint64, 4)
	for _, ns := range []string{"user", "mnt", "pid", "net"} {
		if ino, err := nsInode("/proc/self/ns/" + ns); err == nil {
			m[ns] = ino
		}
	}
	return m
}

func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// message is one line of the launcher's report pipe: the report when the
// server starts (or is refused, or cannot start), then, from an init, the
// server's exit.
type message struct {
	Report *Report    `json:"report,omitempty"`
	Error  string     `json:"error,omitempty"`
	Exit   *ExitError `json:"exit,omitempty"`
}

// ErrRefused is matched (errors.Is) by Started's error when Required
// refused to start the server.
var ErrRefused = errors.New("sandbox: required, but not enforced on this kernel")

// Started closes the daemon's copies of the child's descriptors and waits
// for the launcher's report: what it enforced, once the server runs. It
// fails when the launcher refused (ErrRefused, with the report), could not
// start the server (the command's error), or exited without a word (its
// own exit status then says why, and its standard error, the server's,
// has a line). Under Off it returns at once.
func (l *Launch) Started() (Report, error) {
	if l.level == Off {
		return Report{Level: Off}, nil
	}
	l.closeChild()
	_ = l.report.SetReadDeadline(time.Now().Add(reportTimeout))
	m, err := l.read()
	_ = l.report.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		l.report.Close()
		return Report{Level: l.level}, fmt.Errorf("sandbox: the launcher did not report: %w", err)
	case m.Report != nil && m.Report.Refused != "":
		l.report.Close()
		return *m.Report, fmt.Errorf("%w: %s", ErrRefused, m.Report.Refused)
	case m.Error != "":
		l.report.Close()
		rep := Report{Level: l.level}
		if m.Report != nil {
			rep = *m.Report
		}
		return rep, errors.New(m.Error)
	case m.Report == nil:
		l.report.Close()
		return Report{Level: l.level}, errors.New("sandbox: the launcher's report is empty")
	}
	if !l.init {
		l.report.Close()
	}
	m.Report.Grants = l.grants
	return *m.Report, nil
}

func (l *Launch) read() (message, error) {
	if l.reader == nil {
		l.reader = bufio.NewReader(l.report)
	}
	line, err := l.reader.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return message{}, err
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("report line: %w", err)
	}
	return m, nil
}

// closeChild closes the daemon's copies of the child's descriptors.
func (l *Launch) closeChild() {
	if l.memfd != nil {
		l.memfd.Close()
		l.memfd = nil
	}
	if l.child != nil {
		l.child.Close()
		l.child = nil
	}
}

// Close releases the descriptors of a launch whose command did not start.
// It is safe after Started too, and more than once.
func (l *Launch) Close() {
	if l.level == Off {
		return
	}
	l.closeChild()
	l.report.Close()
}

// Exited translates the wait result of the started command (exec.Cmd.Wait,
// proc.Group.Wait) into the server's own: when the launcher ran as the
// server's init in a PID namespace, its exit status is 128+signal for a
// server killed by a signal, and the exact status came on the report pipe
// (an *ExitError, or nil for status 0). Otherwise, or when the launcher
// itself was killed, waitErr is returned as it is. Call it once the
// command has exited.
func (l *Launch) Exited(waitErr error) error {
	if l.level == Off || !l.init {
		return waitErr
	}
	defer l.report.Close()
	_ = l.report.SetReadDeadline(time.Now().Add(time.Second))
	m, err := l.read()
	if err != nil || m.Exit == nil {
		return waitErr
	}
	if m.Exit.Code == 0 && m.Exit.Signal == 0 {
		return nil
	}
	return m.Exit
}

// ExitError is how a server run under the launcher's init ended.
type ExitError struct {
	Code   int            `json:"code,omitempty"`
	Signal syscall.Signal `json:"signal,omitempty"`
}

func (e *ExitError) Error() string {
	if e.Signal != 0 {
		return "signal: " + e.Signal.String()
	}
	return "exit status " + strconv.Itoa(e.Code)
}
