package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init passes on to the server's process
// group. SIGKILL and SIGSTOP cannot be caught: a SIGKILL of the init ends
// the PID namespace, so the whole tree.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// runInit is the launcher as pid 1 of the server's PID namespace: it
// starts the server (in a process group of its own, which it signals),
// reaps every orphan the namespace gives it, and when the server exits,
// reports its status and exits, which ends every process left in the
// namespace (setsid or not). The daemon signals the init's group, so the
// init alone gets its signals and forwards each once.
//
// The server is forked from this locked thread, so it inherits the
// thread's restrictions. The init's own standard streams are pointed at
// /dev/null once the server runs, so that the daemon sees the end of the
// server's output when the server closes it, not when the init exits.
func (l *launcher) runInit(env []string, devnull *os.File) int {
	server, err := spawnServer(l.pl.Path, l.pl.Argv, env, l.rlimits)
	if err != nil {
		return l.fail(exitNotStarted, "sandbox: start %s: %v", l.pl.Path, err)
	}
	// Signals are caught only now, once the server is starting (the first
	// signal.Notify costs a new thread, half a millisecond), and before
	// the report: one that comes earlier ends the init (Go's default), so
	// the namespace; from Started on, every one is forwarded.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	l.send(message{Report: &l.rep.Report})
	for fd := 0; fd <= 2; fd++ {
		_ = unix.Dup2(int(devnull.Fd()), fd)
	}
	devnull.Close()

	exited := make(chan unix.WaitStatus, 1)
	go reap(server, exited)
	for {
		select {
		case sig := <-sigs:
			_ = unix.Kill(-server, sig.(syscall.Signal))
		case ws := <-exited:
			signal.Stop(sigs)
			exit := &ExitError{}
			status := 0
			switch {
			case ws.Signaled():
				exit.Signal = ws.Signal()
				status = 128 + int(ws.Signal())
			default:
				exit.Code = ws.ExitStatus()
				status = exit.Code
			}
			l.send(message{Exit: exit})
			return status
		}
	}
}

// reap waits for every child of the init, the server's orphans included,
// and sends the server's status once it has exited.
func reap(server int, exited chan<- unix.WaitStatus) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			exited <- ws // ECHILD: nothing left, the server included
			return
		}
		if pid == server {
			exited <- ws
			return
		}
	}
}

// probeChild is the launcher in probe mode: it tries, in the namespaces it
// was cloned into, what a launch will need, and says what worked.
func probeChild(out *os.File, net bool, host [2]uint64) int {
	var res probeResult
	fail := func(what string, err error) {
		if res.Detail == "" {
			res.Detail = what + ": " + err.Error()
		}
	}
	// Never mount in the daemon's own mount namespace (a probe started by
	// hand, or without its clone flags).
	if mnt, err := nsInode("/proc/self/ns/mnt"); err != nil || host[0] == 0 || mnt == host[0] {
		fail("probe", errors.New("not in a mount namespace of its own"))
	} else if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("make mounts private", err)
	} else if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		fail("mount tmpfs", err)
	} else {
		res.View = true
		if os.Getpid() == 1 {
			if err := os.Mkdir("/tmp/proc", 0o755); err == nil {
				if err := unix.Mount("proc", "/tmp/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
					fail("mount proc", err)
				} else {
					res.Proc = true
				}
			}
		}
	}
	if netns, err := nsInode("/proc/self/ns/net"); net && err == nil && host[1] != 0 && netns != host[1] {
		if err := loopbackUp(); err != nil {
			fail("bring lo up", err)
		} else {
			res.Loopback = true
		}
	}
	b, _ := json.Marshal(res)
	_, _ = out.Write(append(b, '\n'))
	return 0
}
