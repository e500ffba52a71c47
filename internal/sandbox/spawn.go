package sandbox

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rlimit is one limit to apply to the server.
type rlimit struct {
	resource uintptr
	value    unix.Rlimit
}

// maxRlimits is how many rlimits a spawn applies at most (a fixed array:
// the child may not index a slice, whose bounds check calls the runtime).
const maxRlimits = 4

// spawn is everything the forked child needs, prepared before the fork:
// after it the child may only make raw system calls.
type spawn struct {
	path    *byte
	argv    []*byte // kept alive for argvp
	envv    []*byte
	argvp   uintptr
	envvp   uintptr
	limits  [maxRlimits]rlimit
	nlimits int
	errFD   int // the write end of a close-on-exec pipe: an errno if exec fails
}

// spawnServer forks the server from this (locked, restricted) thread and
// execs it, the rlimits applied in the child between fork and exec: so
// they bound the server and its tree, not the init, which runs Go (with
// its thread stacks and, under the race detector, its shadow memory) and
// must not fail because the server's limits are tight. Go's os/exec has no
// rlimit hook, hence this small fork of its own, in the pattern of
// syscall.forkAndExecInChild: signals blocked across the fork, and only
// raw system calls, with no stack growth, in the child. The child gets a
// process group of its own (the init signals it) and SIGKILL when the
// init dies; its descriptors are the init's that are not close-on-exec:
// 0, 1, 2 and the caller's ExtraFiles.
func spawnServer(path string, argv, env []string, limits []rlimit) (int, error) {
	if len(limits) > maxRlimits {
		return 0, fmt.Errorf("spawn: %d rlimits", len(limits))
	}
	var s spawn
	var err error
	if s.path, err = syscall.BytePtrFromString(path); err != nil {
		return 0, err
	}
	if s.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return 0, err
	}
	if s.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return 0, err
	}
	s.argvp, s.envvp = uintptr(unsafe.Pointer(&s.argv[0])), uintptr(unsafe.Pointer(&s.envv[0]))
	s.nlimits = copy(s.limits[:], limits)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return 0, err
	}
	s.errFD = p[1]

	var all, old uint64 = ^uint64(0), 0
	runtime.LockOSThread() // the caller holds it already; the mask is this thread's
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	pid, errno := forkChild(&s, &old)
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	runtime.UnlockOSThread()
	runtime.KeepAlive(&s)
	unix.Close(p[1])
	defer unix.Close(p[0])
	if errno != 0 {
		return 0, fmt.Errorf("fork: %w", errno)
	}
	var buf [8]byte
	n, _ := readFull(p[0], buf[:])
	if n == 8 {
		step, code := *(*uint32)(unsafe.Pointer(&buf[0])), syscall.Errno(*(*uint32)(unsafe.Pointer(&buf[4])))
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
		return 0, fmt.Errorf("%s: %w", spawnSteps[step], code)
	}
	return pid, nil
}

// spawnSteps name what the child was doing when it failed.
var spawnSteps = []string{"exec", "setpgid", "parent-death signal", "setrlimit"}

func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			return n, err
		}
		n += m
	}
	return n, nil
}

// forkChild forks; in the child it sets up and execs, and never returns.
//
//go:norace
//go:nosplit
func forkChild(s *spawn, mask *uint64) (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 || r != 0 {
		return int(r), errno
	}
	childExec(s, mask)
	return 0, 0 // not reached
}

// childExec runs in the forked child: raw system calls only.
//
//go:norace
//go:nosplit
func childExec(s *spawn, mask *uint64) {
	var step uint32
	var errno syscall.Errno
	if _, _, errno = syscall.RawSyscall6(syscall.SYS_SETPGID, 0, 0, 0, 0, 0, 0); errno != 0 {
		step = 1
		goto fail
	}
	if _, _, errno = syscall.RawSyscall6(syscall.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0, 0); errno != 0 {
		step = 2
		goto fail
	}
	for i := 0; i < s.nlimits && i < maxRlimits; i++ {
		if _, _, errno = syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, s.limits[i].resource, uintptr(unsafe.Pointer(&s.limits[i].value)), 0, 0, 0); errno != 0 {
			step = 3
			goto fail
		}
	}
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(mask)), 0, 8, 0, 0)
	_, _, errno = syscall.RawSyscall6(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)), s.argvp, s.envvp, 0, 0, 0)
fail:
	var buf [2]uint32
	buf[0], buf[1] = step, uint32(errno)
	_, _, _ = syscall.RawSyscall6(syscall.SYS_WRITE, uintptr(s.errFD), uintptr(unsafe.Pointer(&buf[0])), 8, 0, 0, 0)
	for {
		_, _, _ = syscall.RawSyscall6(syscall.SYS_EXIT_GROUP, exitNotStarted, 0, 0, 0, 0, 0)
	}
}

// applyRlimits sets the limits on this process (before an execve).
func applyRlimits(limits []rlimit) error {
	for _, l := range limits {
		v := l.value
		if err := unix.Prlimit(0, int(l.resource), &v, nil); err != nil {
			return err
		}
	}
	return nil
}
