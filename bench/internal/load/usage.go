package load

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Usage is what a live process has used so far, summed over its threads
// (from /proc/PID/task/*): the scheduler's run time to the nanosecond,
// context switches, and read and write system calls; and the process's
// user and system time to the 10 ms tick (/proc/PID/stat). Threads that
// have exited are not counted; a Go process rarely ends one.
type Usage struct {
	Run       time.Duration // user+system, exact (schedstat)
	User, Sys time.Duration // to the tick (the process's stat)
	Switches  int64         // voluntary and involuntary context switches
	ReadWrite int64         // read(2)- and write(2)-like system calls (io: syscr, syscw)
}

// Sub returns u - v, field by field.
func (u Usage) Sub(v Usage) Usage {
	return Usage{Run: u.Run - v.Run, User: u.User - v.User, Sys: u.Sys - v.Sys,
		Switches: u.Switches - v.Switches, ReadWrite: u.ReadWrite - v.ReadWrite}
}

// Add returns u + v, field by field.
func (u Usage) Add(v Usage) Usage {
	return Usage{Run: u.Run + v.Run, User: u.User + v.User, Sys: u.Sys + v.Sys,
		Switches: u.Switches + v.Switches, ReadWrite: u.ReadWrite + v.ReadWrite}
}

// ProcUsage reads pid's Usage.
func ProcUsage(pid int) (Usage, error) {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*")
	if err != nil || len(tasks) == 0 {
		return Usage{}, errors.Join(err, errors.New("no tasks in /proc/"+strconv.Itoa(pid)))
	}
	var u Usage
	for _, t := range tasks {
		if b, err := os.ReadFile(t + "/schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				u.Run += time.Duration(ns)
			}
		}
		u.Switches += fieldSum(t+"/status", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
		u.ReadWrite += fieldSum(t+"/io", "syscr", "syscw")
	}
	// The process's own figures: the sum of its threads' would add each
	// thread's rounding.
	if f, err := procStat(pid); err == nil && len(f) >= 13 {
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		u.User, u.Sys = time.Duration(ut)*clockTick, time.Duration(st)*clockTick
	}
	return u, nil
}

// fieldSum adds the integer values of the named "name: value" lines of a
// /proc file.
func fieldSum(path string, names ...string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var sum int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				v, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
				sum += v
			}
		}
	}
	return sum
}

// TreePSS is the proportional set size of pid and its live descendants,
// in bytes (/proc/PID/smaps_rollup): what the tree costs the machine,
// its shared pages counted once across the processes that share them.
func TreePSS(pid int) int64 {
	var sum int64
	for _, p := range processTree(pid) {
		sum += pss(p)
	}
	return sum
}

// TreeUsage is the Usage of pid and its live descendants, summed.
func TreeUsage(pid int) Usage {
	var sum Usage
	for _, p := range processTree(pid) {
		if u, err := ProcUsage(p); err == nil {
			sum = sum.Add(u)
		}
	}
	return sum
}
