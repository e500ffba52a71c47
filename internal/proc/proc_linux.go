package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func sysProcAttr(given *syscall.SysProcAttr) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if given != nil {
		a.Cloneflags = given.Cloneflags
		a.UidMappings, a.GidMappings = given.UidMappings, given.GidMappings
		a.GidMappingsEnableSetgroups = given.GidMappingsEnableSetgroups
		a.AmbientCaps = given.AmbientCaps
	}
	return a
}

// waitExited blocks until pid has exited, leaving it unreaped (WNOWAIT).
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// StartTime returns the start time of process pid in clock ticks since boot
// (field 22 of /proc/PID/stat). It fails when the process does not exist.
func StartTime(pid int) (uint64, error) {
	p, err := ReadProcess(pid)
	return p.StartTime, err
}

// Process is what /proc/PID/stat says of one process.
type Process struct {
	PID, PPID, PGID int
	StartTime       uint64 // clock ticks since boot
	State           byte   // 'R', 'S', 'Z' (exited, not reaped) …
	// CPUTicks is the CPU time it and its reaped children used, user and
	// system, in clock ticks (fields 14 to 17); RSSPages its resident
	// pages (field 24).
	CPUTicks uint64
	RSSPages int64
}

// Exited reports whether the process has exited (a zombie has).
func (p Process) Exited() bool { return p.State == 'Z' || p.State == 'X' }

// ReadProcess reads /proc/PID/stat. It fails with an error satisfying
// errors.Is(err, fs.ErrNotExist) when there is no such process.
func ReadProcess(pid int) (Process, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{}, err
	}
	p, err := parseStat(b)
	p.PID = pid
	return p, err
}

// Processes lists every process /proc shows (a process that ends while it
// is read is left out).
func Processes() ([]Process, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := ReadProcess(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// BootID names the current boot of the machine (start times count from
// it); "" where the kernel does not say.
func BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return string(bytes.TrimSpace(b))
}

// parseStat reads fields 3 (state), 4 (ppid), 5 (pgrp) and 22 (starttime).
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted from its last ')'.
func parseStat(b []byte) (Process, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Process{}, fmt.Errorf("parse /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return Process{}, fmt.Errorf("parse /proc stat: %d fields after the command name, want 20", len(f))
	}
	var p Process
	var err1, err2, err3 error
	p.State = f[0][0]
	p.PPID, err1 = strconv.Atoi(string(f[1]))
	p.PGID, err2 = strconv.Atoi(string(f[2]))
	p.StartTime, err3 = strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Process{}, fmt.Errorf("parse /proc stat: %w", err)
	}
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		n, _ := strconv.ParseUint(string(f[i]), 10, 64)
		p.CPUTicks += n
	}
	if len(f) > 21 {
		p.RSSPages, _ = strconv.ParseInt(string(f[21]), 10, 64)
	}
	return p, nil
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// Usage is what a process tree uses: CPU time and resident memory.
type Usage struct {
	// CPU is the user and system time of the tree's live processes and
	// of the children they reaped.
	CPU time.Duration
	// RSSBytes is the resident memory of the live processes, summed
	// (pages they share count once per process).
	RSSBytes int64
	// Processes counts the live processes read.
	Processes int
}

// TreeUsage sums the usage of pid and its live descendants (a sandbox's
// PID namespace holds its whole tree there; without one, a descendant
// that lost its parent is not counted).
func TreeUsage(pid int) (Usage, error) {
	st, err := StartTime(pid)
	if err != nil {
		return Usage{}, err
	}
	page := int64(os.Getpagesize())
	var u Usage
	for _, m := range walk([]member{{pid, st}}) {
		p, err := ReadProcess(m.pid)
		if err != nil || p.StartTime != m.start {
			continue
		}
		u.CPU += time.Duration(p.CPUTicks) * time.Second / clockTicks
		u.RSSBytes += p.RSSPages * page
		u.Processes++
	}
	return u, nil
}
