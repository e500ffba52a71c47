package load

import (
	"time"

	"github.com/snodod/snodod/bench/internal/stats"
	"github.com/snodod/snodod/bench/internal/wire"
)

// Pipelined is one pipelined batch of echo calls and what the server used
// for it.
type Pipelined struct {
	CallsPerSec float64
	P50, P99    float64 // µs
	// Per call: µs of server CPU (exact), its user and system parts (the
	// exact CPU split in the proportion of the process's ticks), context
	// switches and read/write system calls.
	CPUPerCall, UserPerCall, SysPerCall float64
	SwitchesPerCall, ReadWritePerCall   float64
	Wrong                               int
	Problems                            []string // the first wrong answers
}

// RunPipelined sends n echo calls to p, ids from base, keeping inFlight
// outstanding, and measures the batch and the server's usage during it.
// The error is a failure to complete the batch; wrong answers are counted.
func RunPipelined(p *Proc, d wire.Dialect, base int64, n, inFlight int, timeout time.Duration) (Pipelined, error) {
	var res Pipelined
	before, err := ProcUsage(p.PID())
	if err != nil {
		return res, err
	}
	var r StdioResult
	lat, elapsed, wrong, err := pipeline(p.Conn, d, base, n, inFlight, timeout, &r)
	if err != nil {
		return res, err
	}
	after, err := ProcUsage(p.PID())
	if err != nil {
		return res, err
	}
	used := after.Sub(before)
	per := func(v float64) float64 { return v / float64(n) }
	us := func(d time.Duration) float64 { return per(float64(d) / float64(time.Microsecond)) }
	l := stats.Summarise(lat)
	res.CallsPerSec, res.P50, res.P99 = float64(n)/elapsed.Seconds(), l.P50, l.P99
	res.CPUPerCall, res.UserPerCall, res.SysPerCall = us(used.Run), nan(), nan()
	if ticks := used.User + used.Sys; ticks > 0 {
		res.UserPerCall = res.CPUPerCall * float64(used.User) / float64(ticks)
		res.SysPerCall = res.CPUPerCall - res.UserPerCall
	}
	res.SwitchesPerCall, res.ReadWritePerCall = per(float64(used.Switches)), per(float64(used.ReadWrite))
	res.Wrong, res.Problems = wrong, r.Problems
	return res, nil
}
