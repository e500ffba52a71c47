package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// Level names a set of defaults, so that users need not write rules.
type Level string

const (
	// Strict: no network, and read-write only the declared paths (Paths and
	// Roots) and the private home; the system read-only.
	Strict Level = "strict"
	// Standard: the network as the host has it, read-write the directories
	// the server's own arguments, working directory and roots name (or
	// Paths, which replaces that guess) and the private home; the system
	// read-only. The default for hosted servers.
	Standard Level = "standard"
	// Off: the child runs as it would without this package.
	Off Level = "off"
)

// NetworkMode is what a sandboxed child may reach over the network.
type NetworkMode string

const (
	// NetworkNone: a network namespace of its own with no interface up,
	// not even loopback.
	NetworkNone NetworkMode = "none"
	// NetworkLoopback: a network namespace of its own with only lo up: the
	// server and its children may talk to each other over 127.0.0.1, and
	// reach nothing outside, not even the host's loopback (a namespace's
	// loopback is its own; the kernel offers no honest "host loopback only"
	// without one).
	NetworkLoopback NetworkMode = "loopback"
	// NetworkAll: the host's network.
	NetworkAll NetworkMode = "all"
	// NetworkPorts: the host's network, TCP connections only to the ports
	// of Network.Allow (Landlock ABI 4 or later). Landlock filters by port,
	// not by address, so the host of a "host:port" entry is not enforced;
	// UDP is restricted only from Landlock ABI 10 (then: none).
	NetworkPorts NetworkMode = "ports"
)

// Endpoint is one entry of an allow list: "host:port", ":port" or "port".
// Only Port is enforced (see NetworkPorts).
type Endpoint struct {
	Host string
	Port uint16
}

func (e Endpoint) String() string {
	if e.Host == "" {
		return strconv.Itoa(int(e.Port))
	}
	return joinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// ParseEndpoint parses "host:port", "[v6]:port", ":port" or "port".
func ParseEndpoint(s string) (Endpoint, error) {
	host, port := "", s
	if strings.Contains(s, ":") {
		h, p, err := splitHostPort(s)
		if err != nil {
			return Endpoint{}, fmt.Errorf("network entry %q: want host:port or a port: %v", s, err)
		}
		host, port = h, p
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return Endpoint{}, fmt.Errorf("network entry %q: the port must be a number from 1 to 65535", s)
	}
	return Endpoint{Host: host, Port: uint16(n)}, nil
}

// Network is the network rule. The zero value is the level's default
// (Strict: none; Standard: all).
type Network struct {
	Mode  NetworkMode
	Allow []Endpoint // NetworkPorts only: where TCP connections may go
}

// Limits are the child's rlimits, applied to the server and inherited by
// everything it starts. Zero means the default below; Unlimited leaves the
// inherited limit as it is.
type Limits struct {
	// MemoryBytes is RLIMIT_DATA: the private writable memory of each
	// process (not RLIMIT_AS, which V8's WebAssembly reservations exceed;
	// not the tree's sum, which needs a cgroup). Default 4 GiB.
	MemoryBytes int64
	// OpenFiles is RLIMIT_NOFILE. Default 4096.
	OpenFiles int64
	// Processes is RLIMIT_NPROC, counted per user namespace (threads
	// included), so it bounds the server's own tree. It is applied only in
	// a user namespace of the child's own: outside one the kernel counts
	// every process of the uid, the user's whole session. Default 1024.
	Processes int64
}

// Unlimited, as a Limits field, leaves the inherited limit in place.
const Unlimited = -1

// The defaults of Limits.
const (
	DefaultMemoryBytes = 4 << 30
	DefaultOpenFiles   = 4096
	DefaultProcesses   = 1024
)

// DefaultSeccompDeny is what a hosted server never needs, refused with
// EPERM: debugging other processes and their memory, mounting, kernel
// keyrings, modules, kexec, BPF, perf, reboot, swap, the clock, raw I/O
// ports, the kernel log, handle-based opens (the container escape of
// open_by_handle_at), another process's descriptors, userfaultfd and
// io_uring (exploit primitives; libuv falls back without io_uring). A
// filter refusing every syscall of a non-native ABI (i386 int 0x80, x32)
// is installed with it, so this list cannot be bypassed there.
var DefaultSeccompDeny = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen",
	"fsmount", "fsconfig", "fspick", "mount_setattr",
	"kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "acct",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"iopl", "ioperm", "quotactl", "quotactl_fd", "lookup_dcookie", "syslog",
	"vhangup", "open_by_handle_at", "name_to_handle_at", "uselib", "nfsservctl",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// Policy is what a child may do. The zero value of each field is the
// level's default; only Level and Home are needed for a useful sandbox.
// Paths are absolute; relative ones are an error (Validate).
type Policy struct {
	Level Level

	// Paths are the read-write directories or files. Nil means the level's
	// default (Standard: the directories the command's absolute arguments,
	// working directory and Roots name; Strict: Roots only); non-nil
	// replaces that guess, Roots still added.
	Paths []string
	// GuessFrom, when non-nil, are the arguments Standard's guess reads
	// instead of the command's own: an exec tool's fixed arguments, since
	// the rest of its argv is a call's values, which a client chooses and
	// must not be granted. Empty: nothing is guessed from arguments.
	GuessFrom []string
	// ReadOnly are more read-only paths, beyond the system's (/usr, /lib*,
	// /bin, /sbin, /etc, /nix/store) and the command's own files (the
	// command resolved on the child's PATH and its symlinks, its
	// interpreter, their installation prefixes), which are always added.
	ReadOnly []string
	// Roots are the server's MCP roots and folder resources: read-write.
	Roots []string
	// Home is the child's private home, created 0700 if missing: HOME,
	// the XDG_* directories, npm's and uv's caches point into it, so that
	// `npx -y` and `uvx` work and keep their downloads. Required.
	Home string
	// Hide are paths the child must never see even inside a path it may
	// use: the state directory (tokens, records, other servers' homes),
	// the daemon's socket directory. Home may lie under one.
	Hide []string

	Network Network
	Limits  Limits

	// Seccomp lists the syscalls refused with EPERM. Nil means
	// DefaultSeccompDeny; empty (non-nil) installs no filter.
	Seccomp []string
	// SharePIDs runs the child in the daemon's PID namespace (it then sees
	// the host's processes, and a descendant that calls setsid is ended
	// only by the process-group and subreaper rules). Default: a PID
	// namespace of its own.
	SharePIDs bool

	// Required refuses to start the child when a rule it asks for is not
	// enforced by this kernel, instead of starting it with a warning.
	Required bool
}

// Validate reports every problem of p at once, joined.
func (p Policy) Validate() error {
	var errs []error
	switch p.Level {
	case Strict, Standard:
	case Off:
		return nil
	case "":
		errs = append(errs, errors.New("sandbox: no level: want strict, standard or off"))
	default:
		errs = append(errs, fmt.Errorf("sandbox: unknown level %q: want strict, standard or off", p.Level))
	}
	check := func(what string, paths []string) {
		for _, path := range paths {
			if !filepath.IsAbs(path) {
				errs = append(errs, fmt.Errorf("sandbox: %s %q is not an absolute path", what, path))
			}
		}
	}
	check("path", p.Paths)
	check("read-only path", p.ReadOnly)
	check("root", p.Roots)
	check("hidden path", p.Hide)
	if p.Home == "" {
		errs = append(errs, errors.New("sandbox: no private home: a sandboxed child needs one (under the state directory)"))
	} else {
		check("home", []string{p.Home})
	}
	switch p.Network.Mode {
	case "", NetworkNone, NetworkLoopback, NetworkAll:
		if len(p.Network.Allow) > 0 {
			errs = append(errs, fmt.Errorf("sandbox: network %q takes no allow list", p.network()))
		}
	case NetworkPorts:
		if len(p.Network.Allow) == 0 {
			errs = append(errs, errors.New("sandbox: network ports: the allow list is empty (use none)"))
		}
	default:
		errs = append(errs, fmt.Errorf("sandbox: unknown network %q: want none, loopback, all or a list of host:port", p.Network.Mode))
	}
	for _, l := range []struct {
		name string
		v    int64
	}{{"memory", p.Limits.MemoryBytes}, {"open files", p.Limits.OpenFiles}, {"processes", p.Limits.Processes}} {
		if l.v < Unlimited {
			errs = append(errs, fmt.Errorf("sandbox: limit %s is %d: want a positive number, 0 for the default or %d for unlimited", l.name, l.v, Unlimited))
		}
	}
	if info, err := arch.GetInfo(""); err == nil {
		for _, name := range p.Seccomp {
			if _, ok := info.SyscallNames[name]; !ok && !knownElsewhere(name) {
				errs = append(errs, fmt.Errorf("sandbox: seccomp: unknown syscall %q", name))
			}
		}
	}
	return errors.Join(errs...)
}

// knownElsewhere reports whether name is a syscall of another architecture
// than this one (iopl exists on x86 only): a portable deny list names it.
func knownElsewhere(name string) bool {
	for _, a := range []*arch.Info{arch.X86_64, arch.I386, arch.AARCH64, arch.ARM} {
		if _, ok := a.SyscallNames[name]; ok {
			return true
		}
	}
	return false
}

// network is the network mode in force: the level's default when unset.
func (p Policy) network() NetworkMode {
	if p.Network.Mode != "" {
		return p.Network.Mode
	}
	if p.Level == Strict {
		return NetworkNone
	}
	return NetworkAll
}

// seccomp is the deny list in force.
func (p Policy) seccomp() []string {
	if p.Seccomp == nil {
		return DefaultSeccompDeny
	}
	return p.Seccomp
}

// limits is the rlimits in force, defaults filled in.
func (p Policy) limits() Limits {
	l := p.Limits
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	return l
}
