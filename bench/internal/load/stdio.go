package load

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/bench/internal/stats"
	"github.com/snodod/snodod/bench/internal/wire"
)

// StdioConfig sizes the stdio scenarios.
type StdioConfig struct {
	Warmup     int // echo calls before the sequential ones, not measured
	Sequential int // echo calls, one at a time
	Pipelined  int // echo calls with InFlight outstanding
	InFlight   int
	BigResult  int // bytes of the big result
	BigRequest int // bytes of the large request's text
	HugeLine   int // bytes of the oversized request's text
	// LargeRepeats is how many times each large payload is sent in its
	// process; the time is their median, the RSS growth the peak over all.
	LargeRepeats int
	// Outcomes runs the huge-line and cancellation probes, whose answers
	// are behaviours rather than figures.
	Outcomes bool
	Timeout  time.Duration // for one answer
	// HugeTimeout bounds the wait for any reaction to the huge line.
	HugeTimeout time.Duration
}

// StdioResult is what one server did at one protocol version. Figures
// that were not measured are NaN.
type StdioResult struct {
	Server, Version string
	// Unsupported says why the server does not serve this version ("" when
	// it does); the rest is then empty.
	Unsupported string

	StartupMs        float64 // spawn to the first answer
	SeqP50, SeqP99   float64 // µs
	CallsPerSec      float64 // pipelined
	PipeP50, PipeP99 float64 // µs
	CPUPerCall       float64 // µs of server CPU (user+system) per pipelined call
	// Where the pipelined calls' CPU went, per call: user and system time
	// (to the tick), context switches, read and write system calls.
	UserPerCall, SysPerCall, SwitchesPerCall, ReadWritePerCall float64
	BigResultMs                                                float64
	BigResultRSS                                               float64 // bytes: VmHWM growth over the first call
	BigResultRSSAll                                            float64 // bytes: VmHWM growth over all LargeRepeats calls
	BigRequestMs                                               float64
	BigRequestRSS                                              float64 // bytes, as BigResultRSS
	BigRequestRSSAll                                           float64 // bytes, as BigResultRSSAll
	HugeLine, Cancel                                           string  // outcomes, when probed
	WrongAnswers                                               int     // answers to the wrong id, with the wrong text, or errors
	Problems                                                   []string
}

func (r *StdioResult) problem(format string, a ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

func nan() float64 { return math.NaN() }

// RunStdio measures s at the protocol version of d, each group of
// figures in a process of its own.
func RunStdio(s Server, d wire.Dialect, cfg StdioConfig) StdioResult {
	r := StdioResult{Server: s.Name, Version: d.Version,
		StartupMs: nan(), SeqP50: nan(), SeqP99: nan(), CallsPerSec: nan(), PipeP50: nan(), PipeP99: nan(),
		CPUPerCall: nan(), UserPerCall: nan(), SysPerCall: nan(), SwitchesPerCall: nan(), ReadWritePerCall: nan(),
		BigResultMs: nan(), BigResultRSS: nan(), BigResultRSSAll: nan(),
		BigRequestMs: nan(), BigRequestRSS: nan(), BigRequestRSSAll: nan()}
	if !throughput(s, d, cfg, &r) {
		return r
	}
	r.BigResultMs, r.BigResultRSS, r.BigResultRSSAll = large(s, d, cfg, &r, "big result", func(b []byte, id int64) []byte {
		return d.Call(b, id, "big", fmt.Sprintf(`{"bytes":%d}`, cfg.BigResult))
	}, cfg.BigResult)
	r.BigRequestMs, r.BigRequestRSS, r.BigRequestRSSAll = large(s, d, cfg, &r, "large request", func(b []byte, id int64) []byte {
		return d.EchoOf(b, id, cfg.BigRequest)
	}, cfg.BigRequest)
	if cfg.Outcomes {
		r.HugeLine = hugeLine(s, d, cfg)
		r.Cancel = cancel(s, d)
	}
	return r
}

// throughput measures start-up, sequential and pipelined calls and CPU per
// call in one process. It reports false when the server does not serve the
// version (or failed to start).
func throughput(s Server, d wire.Dialect, cfg StdioConfig, r *StdioResult) bool {
	p, err := Spawn(s)
	if err != nil {
		r.Unsupported = err.Error()
		return false
	}
	defer p.Kill()

	// Start-up: the first request goes out at once; its answer is the
	// server's first line.
	first := time.Second * 30
	var l Line
	if d.Stateless() {
		l, err = p.Call(d.Echo(nil, 1), 1, first)
	} else {
		req, initialized := d.Initialize()
		l, err = p.Call(req, 0, first)
		if err == nil && l.Kind == wire.Result {
			err = p.Send(initialized)
		}
	}
	if err != nil {
		r.Unsupported = fmt.Sprintf("no answer to its first request: %v%s", err, stderrNote(p))
		return false
	}
	r.StartupMs = float64(l.At.Sub(p.Started())) / float64(time.Millisecond)
	if d.Stateless() {
		switch {
		case l.Kind == wire.Error:
			code, msg := l.ErrorCode()
			r.Unsupported = fmt.Sprintf("answers error %d %q", code, msg)
			return false
		case CheckEcho(l, 1) != "":
			r.Unsupported = CheckEcho(l, 1)
			return false
		case !l.Modern():
			r.Unsupported = "answers in the 2025 shape (no resultType): no per-request _meta version"
			return false
		}
	} else if l.Kind != wire.Result {
		code, msg := l.ErrorCode()
		r.Unsupported = fmt.Sprintf("initialize: error %d %q", code, msg)
		return false
	}

	id := int64(2)
	var buf []byte
	seq := make([]time.Duration, 0, cfg.Sequential)
	for i := range cfg.Warmup + cfg.Sequential {
		buf = d.Echo(buf[:0], id)
		start := time.Now()
		l, err := p.Call(buf, id, cfg.Timeout)
		if err != nil {
			r.problem("sequential: %v%s", err, stderrNote(p))
			return true
		}
		if i >= cfg.Warmup {
			seq = append(seq, l.At.Sub(start))
		}
		if what := CheckEcho(l, id); what != "" {
			r.WrongAnswers++
			r.problem("sequential call %d: %s", id, what)
		}
		id++
	}
	lat := stats.Summarise(seq)
	r.SeqP50, r.SeqP99 = lat.P50, lat.P99

	pl, err := RunPipelined(p, d, id, cfg.Pipelined, cfg.InFlight, cfg.Timeout)
	r.WrongAnswers += pl.Wrong
	for _, what := range pl.Problems {
		r.problem("%s", what)
	}
	if err != nil {
		r.problem("pipelined: %v%s", err, stderrNote(p))
		return true
	}
	r.CallsPerSec, r.PipeP50, r.PipeP99 = pl.CallsPerSec, pl.P50, pl.P99
	r.CPUPerCall, r.UserPerCall, r.SysPerCall = pl.CPUPerCall, pl.UserPerCall, pl.SysPerCall
	r.SwitchesPerCall, r.ReadWritePerCall = pl.SwitchesPerCall, pl.ReadWritePerCall
	state, killed := p.Close(5 * time.Second)
	switch {
	case killed:
		r.problem("did not exit within 5 s of its input ending; killed")
	case !state.Success():
		r.problem("exited with %s after its input ended%s", state, stderrNote(p))
	}
	return true
}

// pipeline sends n echo calls, ids from base, keeping inFlight of them
// outstanding, and returns each call's latency and the time for all.
func pipeline(c *Conn, d wire.Dialect, base int64, n, inFlight int, timeout time.Duration, r *StdioResult) (lat []time.Duration, elapsed time.Duration, wrong int, err error) {
	sent := make([]atomic.Int64, n)
	slots := make(chan struct{}, inFlight)
	stop := make(chan struct{})
	defer close(stop)
	sendErr := make(chan error, 1)
	start := time.Now()
	go func() {
		var buf []byte
		for i := range n {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			buf = d.Echo(buf[:0], base+int64(i))
			sent[i].Store(time.Now().UnixNano())
			if err := c.Send(buf); err != nil {
				sendErr <- err
				return
			}
		}
	}()
	lat = make([]time.Duration, 0, n)
	for range n {
		l, err := c.Next(timeout)
		if err != nil {
			select {
			case e := <-sendErr:
				err = fmt.Errorf("%w (send: %v)", err, e)
			default:
			}
			return lat, 0, wrong, fmt.Errorf("after %d answers: %w", len(lat), err)
		}
		id, ok := l.IntID()
		i := id - base
		if !ok || i < 0 || i >= int64(n) || (l.Kind != wire.Result && l.Kind != wire.Error) {
			wrong++
			r.problem("pipelined: unexpected line %.200s", l.Bytes)
			continue
		}
		if what := CheckEcho(l, id); what != "" {
			wrong++
			r.problem("pipelined call %d: %s", id, what)
		}
		lat = append(lat, l.At.Sub(time.Unix(0, sent[i].Load())))
		<-slots
	}
	return lat, time.Since(start), wrong, nil
}

// large sends one large request LargeRepeats times in a fresh process and
// returns the median time to its whole answer (ms) and the growth of the
// server's peak RSS (bytes) over the first call and over all of them. The
// first is what one large payload costs; the second adds what the garbage
// of the earlier calls holds until a collection, which in Go is up to the
// 4 MB minimum heap whatever the server does.
func large(s Server, d wire.Dialect, cfg StdioConfig, r *StdioResult, what string, request func([]byte, int64) []byte, size int) (ms, rss, rssAll float64) {
	p, err := spawnReady(s, d)
	if err != nil {
		r.problem("%s: %v", what, err)
		return nan(), nan(), nan()
	}
	defer p.Kill()
	id := int64(1)
	for range 20 {
		if _, err := p.Call(d.Echo(nil, id), id, cfg.Timeout); err != nil {
			r.problem("%s warm-up: %v%s", what, err, stderrNote(p))
			return nan(), nan(), nan()
		}
		id++
	}
	hwm0, err := ProcStatus(p.PID(), "VmHWM")
	if err != nil {
		r.problem("%s: %v", what, err)
		return nan(), nan(), nan()
	}
	rss = nan()
	times := make([]float64, 0, cfg.LargeRepeats)
	for i := range cfg.LargeRepeats {
		line := request(nil, id)
		start := time.Now()
		l, err := p.Call(line, id, cfg.Timeout)
		if err != nil {
			r.problem("%s: %v%s", what, err, stderrNote(p))
			return nan(), nan(), nan()
		}
		if l.Kind != wire.Result || len(l.Text()) != size {
			r.WrongAnswers++
			code, msg := l.ErrorCode()
			r.problem("%s: answer is a %s of %d text bytes, not %d (%d %q)", what, l.Kind, len(l.Text()), size, code, msg)
		}
		times = append(times, float64(l.At.Sub(start))/float64(time.Millisecond))
		id++
		hwm, err := ProcStatus(p.PID(), "VmHWM")
		if err != nil {
			r.problem("%s: %v", what, err)
			return stats.Median(times), nan(), nan()
		}
		if i == 0 {
			rss = float64(hwm - hwm0)
		}
		rssAll = float64(hwm - hwm0)
	}
	return stats.Median(times), rss, rssAll
}

// hugeLine sends one request line longer than servers usually accept and
// tells what came of it: an error line, the whole answer, an exit, or
// nothing; then whether the server still answers.
func hugeLine(s Server, d wire.Dialect, cfg StdioConfig) string {
	p, err := spawnReady(s, d)
	if err != nil {
		return "not run: " + err.Error()
	}
	defer p.Kill()
	const id = 7
	line := d.EchoOf(nil, id, cfg.HugeLine)
	sent := make(chan error, 1)
	start := time.Now()
	go func() { sent <- p.Send(line) }()

	var outcome string
	deadline := start.Add(cfg.HugeTimeout)
	for outcome == "" {
		l, err := p.Next(time.Until(deadline))
		switch {
		case errors.Is(err, ErrTimeout):
			outcome = fmt.Sprintf("no answer in %s (hang)", cfg.HugeTimeout)
		case err != nil:
			outcome = "closed its output" + exitNote(p)
		case l.Kind == wire.Error && (string(l.ID) == "null" || string(l.ID) == fmt.Sprint(id) || l.ID == nil):
			code, msg := l.ErrorCode()
			outcome = fmt.Sprintf("error %d %q (id %s) in %s", code, truncate(msg, 60), l.ID, roundMs(time.Since(start)))
		case l.Kind == wire.Result && string(l.ID) == fmt.Sprint(id):
			n := len(l.Text())
			if n == cfg.HugeLine {
				outcome = fmt.Sprintf("accepted: echoed all %d bytes in %s", n, roundMs(time.Since(start)))
			} else {
				outcome = fmt.Sprintf("accepted: a result of %d text bytes", n)
			}
		}
	}
	select {
	case err := <-sent:
		if err != nil {
			return outcome + "; stopped reading (write failed)"
		}
	case <-time.After(time.Second):
		return outcome + "; stopped reading its input"
	}
	if exited, how := p.Exited(); exited {
		return outcome + "; then exited (" + how + ")"
	}
	l, err := p.Call(d.Echo(nil, id+1), id+1, 3*time.Second)
	switch {
	case err != nil:
		return outcome + "; then no answer to the next call" + exitNote(p)
	case CheckEcho(l, id+1) != "":
		return outcome + "; then answered the next call wrongly: " + CheckEcho(l, id+1)
	}
	return outcome + "; then goes on"
}

// cancel starts sleep 1000, cancels it 100 ms later, and tells whether
// anything was written for it after the cancel.
func cancel(s Server, d wire.Dialect) string {
	p, err := spawnReady(s, d)
	if err != nil {
		return "not run: " + err.Error()
	}
	defer p.Kill()
	const id = 5
	if err := p.Send(d.Call(nil, id, "sleep", `{"ms":1000}`)); err != nil {
		return "not run: " + err.Error()
	}
	time.Sleep(100 * time.Millisecond)
	cancelled := time.Now()
	if err := p.Send(wire.Cancel(id)); err != nil {
		return "not run: " + err.Error()
	}
	var after []string
	for {
		l, err := p.Next(time.Until(cancelled.Add(1500 * time.Millisecond)))
		if errors.Is(err, ErrTimeout) {
			break
		}
		if err != nil {
			return "closed its output after the cancel" + exitNote(p)
		}
		if got, ok := l.IntID(); ok && got == id {
			what := l.Kind.String()
			if l.Kind == wire.Error {
				code, msg := l.ErrorCode()
				what = fmt.Sprintf("error %d %q", code, truncate(msg, 40))
			} else if l.Kind == wire.Result {
				what = fmt.Sprintf("result %q", truncate(string(l.Text()), 20))
			}
			after = append(after, fmt.Sprintf("%s %s after", what, roundMs(l.At.Sub(cancelled))))
		} else if l.Kind == wire.Notification {
			after = append(after, l.Method)
		}
	}
	l, err := p.Call(d.Echo(nil, id+1), id+1, 3*time.Second)
	alive := ""
	if err != nil || CheckEcho(l, id+1) != "" {
		alive = "; then no good answer to the next call"
	}
	if len(after) == 0 {
		return "nothing written after the cancel" + alive
	}
	return "wrote " + strings.Join(after, ", ") + alive
}

func roundMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// exitNote tells how the process ended, if it has within a second.
func exitNote(p *Proc) string {
	select {
	case <-p.waited:
	case <-time.After(time.Second):
		return " (still running)"
	}
	return " (" + p.state.String() + ")" + stderrNote(p)
}

// spawnReady starts a server and makes it ready for calls at d's version
// (a legacy initialize, or nothing in 2026). A handshake failure kills it
// and carries the last line it wrote on stderr.
func spawnReady(s Server, d wire.Dialect) (*Proc, error) {
	p, err := Spawn(s)
	if err != nil {
		return nil, err
	}
	if err := p.Handshake(d, 30*time.Second); err != nil {
		p.Kill()
		return nil, fmt.Errorf("%w%s", err, stderrNote(p))
	}
	return p, nil
}

// stderrNote is the last line the server wrote on standard error, if any.
func stderrNote(p *Proc) string {
	lines := strings.Split(strings.TrimSpace(p.Stderr()), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	return "; stderr: " + truncate(last, 160)
}
