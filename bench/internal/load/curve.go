package load

import (
	"fmt"
	"time"

	"github.com/snodod/snodod/bench/internal/wire"
)

// The scaling curves: how CPU per call and latency grow with
// the work at hand, requests in flight on one connection or sessions at
// once on one daemon.

// Point is one level of a curve.
type Point struct {
	Level       int // requests in flight, or sessions
	Calls       int
	CallsPerSec float64
	P50, P99    float64 // µs
	CPUPerCall  float64 // µs of the server's CPU
	// Per call: the user and system parts of the CPU (to the 10 ms tick),
	// context switches and read/write system calls of the server.
	UserPerCall, SysPerCall, SwitchesPerCall, ReadWritePerCall float64
}

// Curve is one server's curve at one version.
type Curve struct {
	Server, Version, Kind string // Kind: "in flight" or "sessions"
	Points                []Point
	Problems              []string
}

// RunInflightCurve pipelines calls echo calls to a fresh s at each level
// of requests in flight, after as many warm-up calls as the level.
func RunInflightCurve(s Server, d wire.Dialect, levels []int, calls int, timeout time.Duration) Curve {
	c := Curve{Server: s.Name, Version: d.Version, Kind: "in flight"}
	p, err := spawnReady(s, d)
	if err != nil {
		c.Problems = append(c.Problems, err.Error())
		return c
	}
	defer p.Kill()
	base := int64(1)
	for _, level := range levels {
		if _, err := RunPipelined(p, d, base, level, level, timeout); err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("%d in flight, warm-up: %v", level, err))
			return c
		}
		base += int64(level)
		res, err := RunPipelined(p, d, base, calls, level, timeout)
		base += int64(calls)
		if err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("%d in flight: %v", level, err))
			return c
		}
		c.Points = append(c.Points, Point{Level: level, Calls: calls, CallsPerSec: res.CallsPerSec, P50: res.P50, P99: res.P99,
			CPUPerCall: res.CPUPerCall, UserPerCall: res.UserPerCall, SysPerCall: res.SysPerCall,
			SwitchesPerCall: res.SwitchesPerCall, ReadWritePerCall: res.ReadWritePerCall})
	}
	return c
}

// RunSessionsCurve has, at each level, that many sessions of dm make
// echo calls one after another, all at once, about calls in all.
func RunSessionsCurve(dm *Daemon, d wire.Dialect, levels []int, calls int, timeout time.Duration) Curve {
	c := Curve{Server: "snodod serve", Version: d.Version, Kind: "sessions"}
	for _, n := range levels {
		each := max(2, calls/n)
		res := RunConcurrent(dm, d, n, each, timeout)
		for _, p := range res.Problems {
			c.Problems = append(c.Problems, fmt.Sprintf("%d sessions: %s", n, p))
		}
		c.Points = append(c.Points, Point{Level: n, Calls: n * each, CallsPerSec: res.CallsPerSec, P50: res.P50, P99: res.P99,
			CPUPerCall: res.CPUPerCall, UserPerCall: nan(), SysPerCall: nan(), SwitchesPerCall: nan(), ReadWritePerCall: nan()})
	}
	return c
}
