package sandbox

import "syscall"

// sysProcAttrGroup is what proc.Start gives a child: its own process group
// and the parent-death signal.
func sysProcAttrGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGTERM, or SIGKILL, to the process group pgid.
func killGroup(pgid int, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return syscall.Kill(-pgid, sig)
}

// killPID sends SIGKILL to one process.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
