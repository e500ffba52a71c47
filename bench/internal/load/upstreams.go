package load

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/bench/internal/wire"
)

// The hosted-server scenarios (docs/upstreams.md): what relaying through
// `snodod connect NAME` costs over spawning the server directly, and what
// one shared server saves over a copy per client.

// Relay is the relay-overhead scenario of one upstream at one version:
// the same server spawned directly and hosted by snodod serve behind
// snodod connect NAME.
type Relay struct {
	Upstream string // the hosted server's name (raw, go-sdk)
	Version  string
	Direct   StdioResult // the server spawned by the harness
	Relayed  StdioResult // the same server behind snodod connect NAME
	// DaemonCPU and UpstreamCPU are µs of CPU per relayed call, of the
	// daemon and of the hosted server, over the relayed run (handshake,
	// warm-up, sequential and pipelined calls).
	DaemonCPU, UpstreamCPU float64
	// DaemonSwitches and DaemonReadWrite are the daemon's context
	// switches and read/write system calls per relayed call: where its
	// CPU goes.
	DaemonSwitches, DaemonReadWrite float64
	Problems                        []string
}

// upstreamDaemon starts snodod serve hosting command as the upstream
// "up", eagerly, with env (XDG_CONFIG_HOME and XDG_STATE_HOME of its own
// added), and waits for the upstream's process. It returns the daemon and
// the upstream's pid.
func upstreamDaemon(snodod string, command []string, maxSessions int, env []string) (*Daemon, int, error) {
	dir, err := os.MkdirTemp("", "mcpbench-up-")
	if err != nil {
		return nil, 0, err
	}
	if err := writeUpstreamConfig(dir, command); err != nil {
		os.RemoveAll(dir)
		return nil, 0, err
	}
	d, err := StartDaemon(snodod, maxSessions, append(env, "XDG_CONFIG_HOME="+dir, "XDG_STATE_HOME="+dir))
	if err != nil {
		os.RemoveAll(dir)
		return nil, 0, err
	}
	d.extraDirs = append(d.extraDirs, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if kids := children(d.PID()); len(kids) == 1 {
			return d, kids[0], nil
		}
		if time.Now().After(deadline) || !d.Alive() {
			d.Stop()
			return nil, 0, fmt.Errorf("the hosted server did not start: %s", d.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RunRelay measures server directly and behind snodod connect NAME, at d.
func RunRelay(snodod string, server Server, d wire.Dialect, cfg StdioConfig, env []string) Relay {
	r := Relay{Upstream: server.Name, Version: d.Version}
	r.Direct = StdioResult{Server: server.Name, Version: d.Version}
	throughput(server, d, cfg, &r.Direct)
	dm, upPID, err := upstreamDaemon(snodod, server.Command, 16, env)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	defer dm.Stop()
	relayed := Server{Name: server.Name + " via snodod connect", Command: []string{snodod, "connect", "--control-socket", dm.Control(), "up"}}
	r.Relayed = StdioResult{Server: relayed.Name, Version: d.Version}
	// Exact run times (schedstat): at a quick run's counts the 10 ms tick
	// of /proc/PID/stat is a few ticks in all, and the ratio of two such
	// counts says nothing.
	d0, err1 := ProcUsage(dm.PID())
	u0, err2 := ProcUsage(upPID)
	throughput(relayed, d, cfg, &r.Relayed)
	d1, err3 := ProcUsage(dm.PID())
	u1, err4 := ProcUsage(upPID)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			r.Problems = append(r.Problems, "cpu: "+err.Error())
			return r
		}
	}
	calls := float64(cfg.Warmup + cfg.Sequential + cfg.Pipelined + 1)
	r.DaemonCPU = float64(d1.Sub(d0).Run) / float64(time.Microsecond) / calls
	r.UpstreamCPU = float64(u1.Sub(u0).Run) / float64(time.Microsecond) / calls
	r.DaemonSwitches = float64(d1.Sub(d0).Switches) / calls
	r.DaemonReadWrite = float64(d1.Sub(d0).ReadWrite) / calls
	return r
}

// Sharing is the sharing scenario: n clients of one server, as n copies
// (what clients do today) and as one server hosted by snodod.
type Sharing struct {
	Server  string
	Clients int
	// CopiesRSS is the memory (PSS) of the n copies; SharedRSS that of
	// the daemon and its one copy, ConnectRSS that of the n snodod connect
	// processes besides (they only wait for their session's end).
	CopiesRSS, SharedRSS, ConnectRSS float64 // bytes
	// CopiesLastMs and SharedLastMs are the start-to-first-answer of the
	// n-th client (an echo call after its handshake), the others running.
	CopiesLastMs, SharedLastMs float64
	Problems                   []string
}

// RunSharing starts n clients of server both ways, one after the other,
// keeping them all open, and measures the memory and the last one's wait.
func RunSharing(snodod string, server Server, d wire.Dialect, n int, env []string) Sharing {
	s := Sharing{Server: server.Name, Clients: n}
	firstAnswer := func(c Server) (*Proc, float64, error) {
		p, err := Spawn(c)
		if err != nil {
			return nil, 0, err
		}
		if !d.Stateless() {
			req, initialized := d.Initialize()
			if _, err := p.Call(req, 0, 60*time.Second); err != nil {
				p.Kill()
				return nil, 0, err
			}
			if err := p.Send(initialized); err != nil {
				p.Kill()
				return nil, 0, err
			}
		}
		l, err := p.Call(d.Echo(nil, 1), 1, 60*time.Second)
		if err == nil {
			if what := CheckEcho(l, 1); what != "" {
				err = fmt.Errorf("first answer: %s", what)
			}
		}
		if err != nil {
			p.Kill()
			return nil, 0, err
		}
		return p, float64(l.At.Sub(p.Started())) / float64(time.Millisecond), nil
	}
	run := func(c Server, what string) ([]*Proc, float64, bool) {
		var procs []*Proc
		last := 0.0
		for i := range n {
			p, ms, err := firstAnswer(c)
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s: client %d: %v", what, i+1, err))
				return procs, 0, false
			}
			procs = append(procs, p)
			last = ms
		}
		return procs, last, true
	}
	closeAll := func(procs []*Proc) {
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() { p.Close(5 * time.Second) })
		}
		wg.Wait()
	}
	// Memory is the proportional set size: pages shared between
	// processes (the snodod binary's text, node's) count once in all,
	// split among them, where VmRSS would count them in each.
	rss := func(pids ...int) float64 {
		total := 0.0
		for _, pid := range pids {
			total += float64(pss(pid))
		}
		return total
	}

	copies, last, ok := run(server, "copies")
	if ok {
		s.CopiesLastMs = last
		for _, p := range copies {
			s.CopiesRSS += rss(p.PID())
		}
	}
	closeAll(copies)

	dm, upPID, err := upstreamDaemon(snodod, server.Command, n+16, env)
	if err != nil {
		s.Problems = append(s.Problems, err.Error())
		return s
	}
	defer dm.Stop()
	connect := Server{Name: "snodod connect", Command: []string{snodod, "connect", "--control-socket", dm.Control(), "up"}}
	shared, last, ok := run(connect, "shared")
	if ok {
		s.SharedLastMs = last
		s.SharedRSS = rss(dm.PID(), upPID)
		for _, p := range shared {
			s.ConnectRSS += rss(p.PID())
		}
		if kids := children(dm.PID()); len(kids) != 1 {
			s.Problems = append(s.Problems, fmt.Sprintf("%d hosted processes for %d clients, want 1", len(kids), n))
		}
	}
	closeAll(shared)
	return s
}

// pss is a process's proportional set size in bytes, from
// /proc/PID/smaps_rollup; 0 when it cannot be read.
func pss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
