package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Usage is what a process tree costs: the CPU time its live processes
// have used (user and system, not that of children they reaped) and the
// memory resident now.
type Usage struct {
	CPU       time.Duration
	RSS       int64 // bytes
	Processes int
}

// userHZ is the unit of /proc's clock ticks: USER_HZ, 100 on every Linux
// architecture whatever the kernel's own tick rate (proc(5)).
const userHZ = 100

// TreeUsage sums the usage of pid and its live descendants, found from
// parent to child as a stop finds them (a descendant that left for
// another parent is not). It fails when pid itself cannot be read.
func TreeUsage(pid int) (Usage, error) {
	var u Usage
	seen := map[int]bool{}
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		cpu, rss, err := readUsage(p)
		if err != nil {
			if p == pid {
				return Usage{}, err
			}
			continue // ended while the tree was read
		}
		u.CPU += cpu
		u.RSS += rss
		u.Processes++
		todo = append(todo, childrenOf(p)...)
	}
	return u, nil
}

// readUsage reads fields 14 (utime), 15 (stime) and 24 (rss, in pages) of
// /proc/PID/stat.
func readUsage(pid int) (time.Duration, int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseUsage(b)
}

func parseUsage(b []byte) (time.Duration, int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parse /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 {
		return 0, 0, fmt.Errorf("parse /proc stat: %d fields after the command name, want 22", len(f))
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	pages, err3 := strconv.ParseInt(string(f[21]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("parse /proc stat: utime %q, stime %q, rss %q", f[11], f[12], f[21])
	}
	cpu := time.Duration(utime+stime) * (time.Second / userHZ)
	return cpu, pages * int64(os.Getpagesize()), nil
}
