package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// limits decides the server's rlimits (applied by spawnServer in the
// child, or before the execve: never to the init, which runs Go under
// them otherwise) and bounds the PID namespace's pids.
func (l *launcher) limits() {
	lim := l.pl.Policy.limits()
	add := func(feature string, resource int, v int64, unit string) uint64 {
		var cur unix.Rlimit
		_ = unix.Getrlimit(resource, &cur)
		n := min(uint64(v), cur.Max) // a limit can only go down
		l.rlimits = append(l.rlimits, rlimit{resource: uintptr(resource), value: unix.Rlimit{Cur: n, Max: n}})
		if feature != "" {
			l.rep.set(feature, true, "%d%s", n, unit)
		}
		return n
	}
	if lim.MemoryBytes != Unlimited {
		add(FeatureMemoryLimit, unix.RLIMIT_DATA, lim.MemoryBytes, " bytes of data per process")
	}
	if lim.OpenFiles != Unlimited {
		add(FeatureOpenFilesLimit, unix.RLIMIT_NOFILE, lim.OpenFiles, "")
	}
	if lim.Processes == Unlimited {
		return
	}
	var how []string
	if l.got.User && os.Getuid() != 0 {
		n := add("", unix.RLIMIT_NPROC, lim.Processes, "")
		how = append(how, fmt.Sprintf("RLIMIT_NPROC %d tasks of its uid in its user namespace", n))
	}
	if l.proc {
		if n, err := setPIDMax(lim.Processes); err == nil {
			how = append(how, fmt.Sprintf("pid_max %d in its PID namespace (at most %d tasks, at least %d)", n, n-1, lim.Processes))
		}
	}
	if len(how) == 0 {
		l.rep.set(FeatureProcessLimit, false, "RLIMIT_NPROC works only for a non-root uid in a user namespace (outside one it counts every process of the uid; root is exempt), and pid_max of a PID namespace needs Linux 6.14 and a /proc of its own")
		return
	}
	l.rep.set(FeatureProcessLimit, true, "%s", strings.Join(how, "; "))
}

// setPIDMax bounds the pids of this PID namespace (Linux 6.14 made
// pid_max per namespace; it counts threads too, and cannot go below 301)
// so that n tasks always fit and at most n+300 do, whatever the uid: the
// bound RLIMIT_NPROC cannot give root. It reads the value back.
func setPIDMax(n int64) (int64, error) {
	const path = "/proc/sys/kernel/pid_max"
	if !kernelAtLeast(6, 14) {
		// Before 6.14 pid_max is global, and a root mapped to root could
		// write it: never try.
		return 0, errors.New("pid_max is global before Linux 6.14")
	}
	v := n + pidReserved
	if err := os.WriteFile(path, []byte(strconv.FormatInt(v, 10)), 0); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if got, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); got != v {
		return 0, fmt.Errorf("pid_max is %d", got)
	}
	return v, nil
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	release := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	digits := func(s string) int {
		if i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			s = s[:i]
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	maj, mnr := digits(parts[0]), digits(parts[1])
	return maj > major || maj == major && mnr >= minor
}

// pidReserved is the kernel's RESERVED_PIDS: once pids wrap in a
// namespace they start again at this number, not 1.
const pidReserved = 300

// restrictThread drops this thread's capabilities and applies
// no_new_privs, Landlock and seccomp to it, in the order each needs: the
// bounding set first (dropping it needs CAP_SETPCAP), Landlock and seccomp
// after no_new_privs (which lets an unprivileged thread install them), the
// rest of the capabilities last.
func (l *launcher) restrictThread() error {
	capsDropped := dropBoundingSet()
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	l.rep.set(FeatureNoNewPrivs, true, "")
	if err := l.landlock(); err != nil {
		return err
	}
	if err := l.seccomp(); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		l.rep.set(FeatureCapabilities, false, "capset: %v", err)
		return nil
	}
	if capsDropped {
		l.rep.set(FeatureCapabilities, true, "none, and none to gain by exec")
	} else {
		l.rep.set(FeatureCapabilities, true, "none (the bounding set was left: no_new_privs bars gaining any)")
	}
	return nil
}

// dropBoundingSet empties this thread's capability bounding set, so that
// not even an exec as uid 0 gives capabilities back. It needs CAP_SETPCAP;
// without it (an unprivileged launcher outside a user namespace) there is
// nothing to drop.
func dropBoundingSet() bool {
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return false
		}
	}
	return true
}

// landlock restricts this thread to the grants, the network rule and the
// IPC scopes, at the best ABI the kernel has.
func (l *launcher) landlock() error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		l.rep.set(FeatureLandlockFS, false, "Landlock is not available in this kernel")
		l.netFallback(0)
		l.rep.set(FeatureLandlockScopes, false, "Landlock is not available")
		return nil
	}
	p := l.pl.Policy
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}
	var rules []landlock.Rule
	mode := p.network()
	switch {
	case mode == NetworkPorts:
		cfg.HandledAccessNet = ll.AccessNetConnectTCP
		for _, e := range p.Network.Allow {
			rules = append(rules, landlock.ConnectTCP(e.Port))
		}
	case (mode == NetworkNone || mode == NetworkLoopback) && !l.got.Net:
		cfg.HandledAccessNet = ll.AccessNetConnectTCP | ll.AccessNetBindTCP | ll.AccessNetBindUDP | ll.AccessNetConnectSendUDP
	}
	fsRules, hidden := l.fsRules(abi)
	rules = append(rules, fsRules...)
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if fd >= 0 {
		defer unix.Close(fd)
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	detail := fmt.Sprintf("ABI %d, %d grants", abi, len(l.pl.Grants))
	if hidden > 0 {
		detail += fmt.Sprintf("; hidden paths carved out of %d grants (entries made there later are not covered)", hidden)
	}
	l.rep.set(FeatureLandlockFS, true, "%s", detail)
	l.netFallback(abi)
	if abi >= 6 {
		l.rep.set(FeatureLandlockScopes, true, "no signals or abstract unix sockets outside the sandbox")
	} else {
		l.rep.set(FeatureLandlockScopes, false, "Landlock ABI %d < 6", abi)
	}
	return nil
}

// netFallback reports what Landlock does for the network at abi.
func (l *launcher) netFallback(abi int) {
	p := l.pl.Policy
	mode := p.network()
	udp := "UDP too"
	if abi < 10 {
		udp = fmt.Sprintf("UDP not restricted (Landlock ABI %d < 10)", abi)
	}
	switch {
	case mode == NetworkPorts && abi >= 4:
		ports := make([]string, len(p.Network.Allow))
		for i, e := range p.Network.Allow {
			ports[i] = strconv.Itoa(int(e.Port))
		}
		l.rep.set(FeatureLandlockTCP, true, "TCP connections only to ports %s (hosts are not enforced); UDP not restricted", strings.Join(ports, ", "))
	case mode == NetworkPorts:
		l.rep.set(FeatureLandlockTCP, false, "Landlock ABI %d < 4 has no TCP rules", abi)
	case (mode == NetworkNone || mode == NetworkLoopback) && !l.got.Net && abi >= 4:
		l.rep.set(FeatureLandlockTCP, true, "no network namespace: every TCP connection and bind refused; %s", udp)
	}
}

// fsRules turns the grants (and the view's /dev, /proc, /sys, /tmp) into
// Landlock rules. Without a filesystem view, a grant that contains a
// hidden path is replaced by its entries other than the one leading to it,
// down to the hidden path: Landlock can only allow, not carve out.
func (l *launcher) fsRules(abi int) ([]landlock.Rule, int) {
	var grants []Grant
	grants = append(grants, l.pl.Grants...)
	grants = append(grants, Grant{Path: "/proc"}, Grant{Path: "/sys"})
	if l.view {
		grants = append(grants, Grant{Path: "/dev", Write: true}, Grant{Path: "/tmp", Write: true})
	} else {
		for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"} {
			grants = append(grants, Grant{Path: d, Write: true})
		}
	}
	carved := 0
	if !l.view {
		grants, carved = carve(grants, l.pl.Policy.Hide, l.pl.Policy.Home)
	}
	var rules []landlock.Rule
	for _, g := range grants {
		fi, err := os.Stat(g.Path)
		if err != nil {
			continue
		}
		var r landlock.FSRule
		switch {
		case fi.IsDir() && g.Write:
			r = landlock.RWDirs(g.Path).WithResolveUnix()
			if abi >= 2 {
				r = r.WithRefer() // npm and pip rename across directories
			}
		case fi.IsDir():
			r = landlock.RODirs(g.Path)
		case g.Write:
			r = landlock.RWFiles(g.Path)
		default:
			r = landlock.ROFiles(g.Path)
		}
		if strings.HasPrefix(g.Path, "/dev") && g.Write {
			r = r.WithIoctlDev() // terminals of the server's own ptys
		}
		rules = append(rules, r.IgnoreIfMissing())
	}
	return rules, carved
}

// carve replaces every grant that strictly contains a hidden path by the
// entries of each directory on the way to it, except that way; home keeps
// its own grant. It returns the new grants and how many were carved.
func carve(grants []Grant, hide []string, home string) ([]Grant, int) {
	carved := 0
	for _, h := range hide {
		var out []Grant
		for _, g := range grants {
			if g.Path == h && g.Path != home {
				carved++
				continue
			}
			if !within(h, g.Path) || h == g.Path {
				out = append(out, g)
				continue
			}
			carved++
			dir := g.Path
			for dir != h {
				next := nextComponent(dir, h)
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					p := join(dir, e.Name())
					if p != next {
						out = append(out, Grant{Path: p, Write: g.Write, Why: g.Why})
					}
				}
				dir = next
			}
		}
		grants = out
	}
	return grants, carved
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// nextComponent is the child of dir on the way to path (path under dir).
func nextComponent(dir, path string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(path, dir), "/")
	first, _, _ := strings.Cut(rest, "/")
	return join(dir, first)
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// seccomp installs on this thread the filter Wrap assembled (seccompFilter).
func (l *launcher) seccomp() error {
	f := l.pl.Seccomp
	switch {
	case f == nil:
		return nil
	case f.Err != "":
		l.rep.set(FeatureSeccomp, false, "%s", f.Err)
		return nil
	}
	filter := make([]unix.SockFilter, len(f.Program))
	for i, ins := range f.Program {
		filter[i] = unix.SockFilter{Code: uint16(ins >> 48), Jt: uint8(ins >> 40), Jf: uint8(ins >> 32), K: uint32(ins)}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EINVAL {
			l.rep.set(FeatureSeccomp, false, "seccomp is not available in this kernel: %v", errno)
			return nil
		}
		return fmt.Errorf("seccomp: %w", errno)
	}
	l.rep.set(FeatureSeccomp, true, "%d syscalls refused (EPERM); other ABIs refused", f.Denied)
	return nil
}

// loopbackUp brings lo up in this network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
