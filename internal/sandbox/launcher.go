package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The launcher's exit statuses when the server did not run.
const (
	exitLauncherFailed = 125 // the launcher could not apply its plan
	exitRefused        = 126 // Required, and something is not enforced
	exitNotStarted     = 127 // the command could not be executed
)

// The launcher runs from init, before the initialisation of the packages
// that import this one (the binary's configuration, HTTP and MCP stacks),
// so that a launch costs the Go runtime's start and little more, and so
// that every binary linking this package (snodod, and the test binaries of
// the packages that start children) can be re-executed as a launcher.
func init() {
	if len(os.Args) >= 3 && os.Args[1] == launcherArg {
		// syscall.Exit, not os.Exit: the launcher has nothing to flush,
		// and a race-detector build (tests) would pause a second at exit.
		syscall.Exit(launcherMain(os.Args[2:]))
	}
}

// launcherMain is the hidden mode: "probe REPORTFD" or "run PLANFD REPORTFD".
func launcherMain(args []string) int {
	fds := make([]int, 0, 2)
	var host [2]uint64
	if strings.HasPrefix(args[0], "probe") && len(args) == 3 {
		// The probe's last argument is the daemon's mount and network
		// namespaces, "MNT,NET": the probe changes only others.
		m, n, _ := strings.Cut(args[2], ",")
		host[0], _ = strconv.ParseUint(m, 10, 64)
		host[1], _ = strconv.ParseUint(n, 10, 64)
		args = args[:2]
	}
	for _, a := range args[1:] {
		fd, err := strconv.Atoi(a)
		if err != nil || fd < 3 {
			fmt.Fprintf(os.Stderr, "snodod sandbox: launcher: bad descriptor %q\n", a)
			return exitLauncherFailed
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			fmt.Fprintf(os.Stderr, "snodod sandbox: launcher: descriptor %d: %v\n", fd, err)
			return exitLauncherFailed
		}
		unix.CloseOnExec(fd)
		fds = append(fds, fd)
	}
	switch {
	case (args[0] == "probe" || args[0] == "probe+net") && len(fds) == 1:
		return probeChild(os.NewFile(uintptr(fds[0]), "report"), args[0] == "probe+net", host)
	case args[0] == "run" && len(fds) == 2:
		l := &launcher{out: os.NewFile(uintptr(fds[1]), "report"), planFD: fds[0]}
		return l.main()
	}
	fmt.Fprintln(os.Stderr, "snodod sandbox: launcher: bad arguments")
	return exitLauncherFailed
}

// launcher applies one plan. Its steps run on the main goroutine, locked
// to its thread: capabilities, no_new_privs, Landlock and seccomp are
// applied to that thread only, and the server is forked (or execve'd)
// from it, so it inherits exactly them while the launcher's other threads
// keep what they need to reap and forward signals.
type launcher struct {
	out    *os.File
	planFD int
	pl     plan
	rep    report
	got    namespaces
	view   bool // the filesystem view was built
	proc   bool // a /proc of the PID namespace is mounted
	// rlimits are the server's, applied in its process only.
	rlimits []rlimit
}

func (l *launcher) main() int {
	runtime.LockOSThread() // never unlocked: the thread ends with the process
	if err := l.readPlan(); err != nil {
		return l.fail(exitLauncherFailed, "sandbox: launcher: %v", err)
	}
	p := l.pl.Policy
	l.rep.Level = p.Level
	l.got = l.detect()

	l.namespaceFeatures()
	env := l.environment()
	dir := l.pl.Dir
	if dir == "" && l.view {
		dir = "/"
	}
	if dir != "" {
		if err := os.Chdir(dir); err != nil {
			return l.fail(exitNotStarted, "sandbox: working directory %s: %v", dir, err)
		}
	}
	l.limits()
	if l.got.PID {
		// Nothing of the server's may read or trace its init.
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return l.fail(exitLauncherFailed, "sandbox: launcher: %v", err)
	}
	if err := l.restrictThread(); err != nil {
		return l.fail(exitLauncherFailed, "sandbox: %v", err)
	}
	if p.Required {
		if missing := l.rep.Missing(); len(missing) > 0 {
			parts := make([]string, len(missing))
			for i, f := range missing {
				parts[i] = f.String()
			}
			l.rep.Refused = strings.Join(parts, "; ")
			l.send(message{Report: &l.rep.Report})
			fmt.Fprintf(os.Stderr, "snodod sandbox: refusing to start %s: required, but not enforced: %s\n", l.pl.Path, l.rep.Refused)
			return exitRefused
		}
	}
	if l.got.PID {
		return l.runInit(env, devnull)
	}
	return l.exec(env)
}

// readPlan reads the plan from its memfd (from offset 0: the daemon's
// writes left the shared offset at the end).
func (l *launcher) readPlan() error {
	f := os.NewFile(uintptr(l.planFD), "plan")
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return fmt.Errorf("read the plan: %w", err)
	}
	if err := json.Unmarshal(b, &l.pl); err != nil {
		return fmt.Errorf("read the plan: %w", err)
	}
	if !filepath.IsAbs(l.pl.Path) || len(l.pl.Argv) == 0 {
		return fmt.Errorf("the plan has no command")
	}
	return nil
}

// detect compares this process's namespaces with the daemon's: what it
// really got, whatever was asked (a caller may have dropped clone flags).
func (l *launcher) detect() namespaces {
	differs := func(ns string) bool {
		host, ok := l.pl.Host[ns]
		ino, err := nsInode("/proc/self/ns/" + ns)
		return ok && err == nil && ino != host
	}
	return namespaces{User: differs("user"), Mount: differs("mnt"), PID: differs("pid") && os.Getpid() == 1, Net: differs("net")}
}

// namespaceFeatures builds the view and the network, and reports both.
func (l *launcher) namespaceFeatures() {
	p := l.pl.Policy
	if l.got.User {
		l.rep.set(FeatureUserNamespace, true, "uid %d", os.Getuid())
	} else {
		l.rep.set(FeatureUserNamespace, false, "%s", l.why(l.pl.Asked.User, "user"))
	}
	if l.got.Mount {
		if err := l.buildView(); err != nil {
			l.rep.set(FeatureFilesystemView, false, "%v", err)
		} else {
			l.view = true
			l.rep.set(FeatureFilesystemView, true, "only the granted paths exist; private /tmp and /dev; hidden: %d", len(p.Hide))
		}
	} else {
		l.rep.set(FeatureFilesystemView, false, "%s", l.why(l.pl.Asked.Mount, "mount"))
	}
	if !p.SharePIDs {
		if l.got.PID {
			l.rep.set(FeaturePIDNamespace, true, "the tree ends with the server")
		} else {
			l.rep.set(FeaturePIDNamespace, false, "%s", l.why(l.pl.Asked.PID, "pid"))
		}
		switch {
		case l.proc:
			l.rep.set(FeaturePrivateProc, true, "only the sandbox's processes")
		case l.got.PID && l.view:
			l.rep.set(FeaturePrivateProc, false, "the host's /proc has covered parts (a container?): it is shown instead")
		default:
			l.rep.set(FeaturePrivateProc, false, "needs a PID namespace and a filesystem view")
		}
	}
	mode := p.network()
	if mode != NetworkNone && mode != NetworkLoopback {
		return
	}
	if !l.got.Net {
		l.rep.set(FeatureNetworkNamespace, false, "%s", l.why(l.pl.Asked.Net, "network"))
		return
	}
	if mode == NetworkNone {
		l.rep.set(FeatureNetworkNamespace, true, "no interface up")
		return
	}
	if err := loopbackUp(); err != nil {
		l.rep.set(FeatureNetworkNamespace, true, "isolated, but lo is down: %v", err)
		return
	}
	l.rep.set(FeatureNetworkNamespace, true, "only lo up")
}

// why explains a missing namespace.
func (l *launcher) why(asked bool, ns string) string {
	if asked {
		return "asked for, but not given: was the command started without its SysProcAttr?"
	}
	return "this kernel or user may not create a " + ns + " namespace here"
}

// environment is the server's environment: the plan's, with its home, its
// caches and temporary directory pointing where it may write, and the
// user's agent sockets (ssh, gpg, D-Bus) removed; then the launcher's own
// environment, which Wrap empties and only the daemon's process starter
// fills after it (internal/proc's group marker, SNODOD_GROUP, by which the
// daemon finds what a server leaves behind), so that it reaches the server
// and everything the server starts.
func (l *launcher) environment() []string {
	home := l.pl.Policy.Home
	tmp := "/tmp"
	if !l.view {
		tmp = filepath.Join(home, ".tmp")
		_ = os.MkdirAll(tmp, 0o700)
	}
	set := map[string]string{
		"HOME":             home,
		"XDG_CACHE_HOME":   filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME":  filepath.Join(home, ".config"),
		"XDG_DATA_HOME":    filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME":   filepath.Join(home, ".local", "state"),
		"npm_config_cache": filepath.Join(home, ".npm"),
		"UV_CACHE_DIR":     filepath.Join(home, ".cache", "uv"),
		"TMPDIR":           tmp,
	}
	drop := map[string]bool{"XDG_RUNTIME_DIR": true, "SSH_AUTH_SOCK": true, "GPG_AGENT_INFO": true, "DBUS_SESSION_BUS_ADDRESS": true}
	env := make([]string, 0, len(l.pl.Env)+len(set))
	for _, kv := range l.pl.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || drop[k] {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range []string{"HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "npm_config_cache", "UV_CACHE_DIR", "TMPDIR"} {
		env = append(env, k+"="+set[k])
	}
	own := os.Environ()
	if len(own) == 0 {
		return env
	}
	mine := make(map[string]bool, len(own))
	for _, kv := range own {
		k, _, _ := strings.Cut(kv, "=")
		mine[k] = true
	}
	env = slices.DeleteFunc(env, func(kv string) bool { k, _, _ := strings.Cut(kv, "="); return mine[k] })
	return append(env, own...)
}

// send writes one message on the report pipe.
func (l *launcher) send(m message) {
	b, _ := json.Marshal(m)
	_, _ = l.out.Write(append(b, '\n'))
}

// fail reports an error (on the pipe, and one line on standard error, which
// is the server's: the daemon's log of it) and returns status.
func (l *launcher) fail(status int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	l.send(message{Report: &l.rep.Report, Error: msg})
	fmt.Fprintln(os.Stderr, "snodod "+msg)
	return status
}

// exec replaces the launcher by the server (no PID namespace: the server
// is the process the daemon started).
//
// The launcher catches no signal: one that comes before the exec ends it
// (Go's default), and the server never starts, as asked.
func (l *launcher) exec(env []string) int {
	if err := unix.Access(l.pl.Path, unix.X_OK); err != nil {
		return l.fail(exitNotStarted, "sandbox: start %s: %v", l.pl.Path, err)
	}
	l.send(message{Report: &l.rep.Report})
	if err := applyRlimits(l.rlimits); err != nil {
		return l.fail(exitNotStarted, "sandbox: setrlimit: %v", err)
	}
	err := syscall.Exec(l.pl.Path, l.pl.Argv, env)
	return l.fail(exitNotStarted, "sandbox: start %s: %v", l.pl.Path, err)
}
