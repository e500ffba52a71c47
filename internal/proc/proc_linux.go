package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return st.startTime, nil
}

// stat is what this package reads of /proc/PID/stat.
type stat struct {
	state     byte
	ppid      int
	pgid      int
	startTime uint64
}

func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	return parseStat(b)
}

// parseStat reads fields 3 (state), 4 (ppid), 5 (pgrp) and 22 (starttime).
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted from its last ')'.
func parseStat(b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("parse /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return stat{}, fmt.Errorf("parse /proc stat: %d fields after the command name, want 20", len(f))
	}
	var st stat
	var err1, err2, err3 error
	st.state = f[0][0]
	st.ppid, err1 = strconv.Atoi(string(f[1]))
	st.pgid, err2 = strconv.Atoi(string(f[2]))
	st.startTime, err3 = strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return stat{}, fmt.Errorf("parse /proc stat: %w", err)
	}
	return st, nil
}
