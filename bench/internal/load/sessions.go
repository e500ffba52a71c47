package load

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/snodod/snodod/bench/internal/stats"
	"github.com/snodod/snodod/bench/internal/wire"
)

// Concurrent is what many sessions calling at once achieved.
type Concurrent struct {
	Sessions, CallsEach int
	CallsPerSec         float64
	P50, P99            float64 // µs
	CPUPerCall          float64 // µs of the daemon's CPU per good call (exact, schedstat)
	Failed              int     // calls without a good answer
	Problems            []string
}

// RunConcurrent opens sessions sessions, then has each make calls echo
// calls one after the other, all sessions at once.
func RunConcurrent(d *Daemon, dialect wire.Dialect, sessions, calls int, timeout time.Duration) Concurrent {
	r := Concurrent{Sessions: sessions, CallsEach: calls, CallsPerSec: nan(), P50: nan(), P99: nan(), CPUPerCall: nan()}
	ss, err := d.openMany(sessions, dialect)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	defer closeAll(ss)
	lat := make([][]time.Duration, sessions)
	problems := make([]string, sessions)
	failed := make([]int, sessions)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			lat[i] = make([]time.Duration, 0, calls)
			var buf []byte
			<-start
			for c := range calls {
				id := int64(c + 1)
				buf = dialect.Echo(buf[:0], id)
				t0 := time.Now()
				l, err := s.Call(buf, id, timeout)
				if err != nil {
					failed[i] += calls - c
					problems[i] = fmt.Sprintf("session %d: %v", i, err)
					return
				}
				if what := CheckEcho(l, id); what != "" {
					failed[i]++
					problems[i] = fmt.Sprintf("session %d call %d: %s", i, id, what)
					continue
				}
				lat[i] = append(lat[i], l.At.Sub(t0))
			}
		})
	}
	before, uerr := ProcUsage(d.PID())
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	after, aerr := ProcUsage(d.PID())
	var all []time.Duration
	for i := range lat {
		all = append(all, lat[i]...)
		r.Failed += failed[i]
		if problems[i] != "" && len(r.Problems) < 10 {
			r.Problems = append(r.Problems, problems[i])
		}
	}
	s := stats.Summarise(all)
	r.CallsPerSec = float64(len(all)) / elapsed.Seconds()
	r.P50, r.P99 = s.P50, s.P99
	if uerr == nil && aerr == nil && len(all) > 0 {
		r.CPUPerCall = float64(after.Sub(before).Run) / float64(time.Microsecond) / float64(len(all))
	}
	return r
}

// Idle is the daemon's memory with many idle sessions.
type Idle struct {
	Sessions          int
	RSSEmpty, RSSIdle float64 // bytes
	PerSession        float64 // bytes
	DaemonNoFile      string  // the daemon's RLIMIT_NOFILE, soft/hard
	StillAnswers      bool    // a new session answered while they were open
	Problems          []string
}

// RunIdle measures the daemon's RSS empty and with n initialized, idle
// sessions.
func RunIdle(d *Daemon, dialect wire.Dialect, n int, settle time.Duration) Idle {
	r := Idle{Sessions: n, RSSEmpty: nan(), RSSIdle: nan(), PerSession: nan(), DaemonNoFile: NoFileLimit(d.PID())}
	// One session first, so that what the first one initialises once is in
	// the empty figure.
	if s, err := d.Open(dialect, 30*time.Second); err == nil {
		_, _ = s.Call(dialect.Echo(nil, 1), 1, 10*time.Second)
		s.Close()
	}
	time.Sleep(settle)
	empty, err := ProcStatus(d.PID(), "VmRSS")
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	ss, err := d.openMany(n, dialect)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	defer closeAll(ss)
	time.Sleep(settle)
	idle, err := ProcStatus(d.PID(), "VmRSS")
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	r.RSSEmpty, r.RSSIdle = float64(empty), float64(idle)
	r.PerSession = float64(idle-empty) / float64(n)
	if s, err := d.Open(dialect, 10*time.Second); err == nil {
		l, err := s.Call(dialect.Echo(nil, 1), 1, 10*time.Second)
		r.StillAnswers = err == nil && CheckEcho(l, 1) == ""
		s.Close()
	} else {
		r.Problems = append(r.Problems, "a new session with the idle ones open: "+err.Error())
	}
	return r
}

// Stalled is the healthy sessions' latency with and without one client
// that has stopped reading.
type Stalled struct {
	Healthy                int
	BaseP50, BaseP99       float64 // µs
	StalledP50, StalledP99 float64 // µs
	Ratio                  float64 // StalledP99 / BaseP99
	Failed                 int
	// StalledSession tells what the daemon did with the stalled session.
	StalledSession string
	Problems       []string
}

// RunStalled measures healthy sessions making echo calls for d each phase,
// first alone, then while one more session has sent requests for big
// results and reads nothing. With watch, it then waits up to watch for the
// daemon to end the stalled session and says what happened.
func RunStalled(dm *Daemon, dialect wire.Dialect, healthy int, d time.Duration, bigRequests, bigBytes int, watch time.Duration) Stalled {
	r := Stalled{Healthy: healthy, BaseP50: nan(), BaseP99: nan(), StalledP50: nan(), StalledP99: nan(), Ratio: nan()}
	ss, err := dm.openMany(healthy, dialect)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	defer closeAll(ss)
	phase := func(first int64) ([]time.Duration, int, string) {
		lat := make([][]time.Duration, len(ss))
		failed := make([]int, len(ss))
		problem := make([]string, len(ss))
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for i, s := range ss {
			wg.Go(func() {
				var buf []byte
				for id := first; time.Now().Before(end); id++ {
					buf = dialect.Echo(buf[:0], id)
					t0 := time.Now()
					l, err := s.Call(buf, id, 10*time.Second)
					if err != nil {
						failed[i]++
						problem[i] = err.Error()
						return
					}
					if what := CheckEcho(l, id); what != "" {
						failed[i]++
						problem[i] = what
						continue
					}
					lat[i] = append(lat[i], l.At.Sub(t0))
				}
			})
		}
		wg.Wait()
		var all []time.Duration
		n, why := 0, ""
		for i := range lat {
			all = append(all, lat[i]...)
			n += failed[i]
			if problem[i] != "" {
				why = problem[i]
			}
		}
		return all, n, why
	}
	base, failed, why := phase(1)
	if why != "" {
		r.Problems = append(r.Problems, "healthy sessions alone: "+why)
	}
	b := stats.Summarise(base)
	r.BaseP50, r.BaseP99 = b.P50, b.P99

	// The stalled client: a handshake, then requests for big results, and
	// never another read.
	nc, err := dm.Dial()
	if err != nil {
		r.Problems = append(r.Problems, "stalled client: "+err.Error())
		return r
	}
	defer nc.Close()
	stuck := NewConn(nc, nc, 1)
	if err := stuck.Handshake(dialect, 10*time.Second); err != nil {
		r.Problems = append(r.Problems, "stalled client: "+err.Error())
		return r
	}
	// Stop reading for good: a read deadline in the past ends the
	// connection's reader goroutine, which would otherwise drain the socket.
	stuck.Discard()
	_ = nc.SetReadDeadline(time.Unix(1, 0))
	stalledAt := time.Now()
	go func() {
		var buf []byte
		for i := range bigRequests {
			buf = dialect.Call(buf[:0], int64(1000+i), "big", `{"bytes":`+strconv.Itoa(bigBytes)+`}`)
			if stuck.Send(buf) != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // let the daemon's writes to it block

	stalled, failed2, why := phase(1_000_000)
	if why != "" {
		r.Problems = append(r.Problems, "healthy sessions beside the stalled one: "+why)
	}
	s := stats.Summarise(stalled)
	r.StalledP50, r.StalledP99 = s.P50, s.P99
	r.Ratio = stats.Ratio(r.StalledP99, r.BaseP99)
	r.Failed = failed + failed2

	if watch > 0 {
		r.StalledSession = watchStalled(nc, stalledAt, watch)
	}
	return r
}

// watchStalled reads the stalled session until the daemon closes it or
// until watch has passed since the client stopped reading.
func watchStalled(nc net.Conn, since time.Time, watch time.Duration) string {
	// Wait without reading, then drain what the daemon managed to write
	// and see whether the session was closed.
	time.Sleep(time.Until(since.Add(watch)))
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1<<20)
	n := 0
	for {
		k, err := nc.Read(buf)
		n += k
		switch {
		case err == nil:
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Sprintf("still open %s after it stopped reading (%d bytes were waiting)", watch, n)
		default:
			return fmt.Sprintf("closed by the daemon within %s (%d bytes were waiting; %v)", watch, n, err)
		}
	}
}
