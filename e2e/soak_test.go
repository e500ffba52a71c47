//go:build soak

package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// TestSoak is `make soak` (docs/bench-soak.md): SOAK_SESSIONS sessions (default
// 1,000: sockets, hand-overs, ptys, HTTP) call the demo tools, an exec
// tool, a file resource and two hosted servers (the fake, and
// server-memory from npm) for SOAK_TIME (default 10m), with progress,
// cancellations and a subscription each, while the configuration is
// reloaded every 30 s, a hosted server is killed every 60 s, a third
// floods a session that never answers with requests, and a client floods
// the daemon with answers it never reads every 45 s (soak_flood_test.go). It
// reports what docs/bench-soak.md shows and writes it to SOAK_DOCS when set.
//
// It lives here, behind the soak build tag, rather than in bench/: it
// drives the daemon through the fault suite's helpers and the main
// module's packages (control.Client.Connect passes descriptors the way `snodod
// connect` does, without a process per session; control.Client.Status),
// which bench/, a module of its own, cannot import. The daemon is built
// without the race detector, which would distort its memory and speed.
func TestSoak(t *testing.T) {
	dur := soakEnv(t, "SOAK_TIME", 10*time.Minute)
	total := int(soakEnv(t, "SOAK_SESSIONS", 1000))
	defer func(race string) { binary = race }(binary)
	binary = plainBinary(t)

	h := newSoakHarness(t)
	d := startDaemon(t, h.config(false), []string{"XDG_STATE_HOME=" + filepath.Join(h.dir, "state")})
	h.d = d
	d.awaitStatus(t, "both hosted servers ready", 2*time.Minute, func(st *control.Status) bool {
		f, _ := upstreamState(st, "fake")
		m, _ := upstreamState(st, "memory")
		return f.State == "ready" && m.State == "ready"
	})
	h.open(t, total)
	start := h.sample(t, "start (every session open)")
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for i, s := range h.sessions {
		wg.Go(func() { h.drive(s, i, deadline) })
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { h.every(30*time.Second, stop, func(n int) { h.reload(t, n) }) })
	bg.Go(func() { h.every(60*time.Second, stop, func(n int) { h.kill(t, n) }) })
	bg.Go(func() { h.every(60*time.Second, stop, func(int) { h.flood(t) }) })
	bg.Go(func() { h.every(5*time.Second, stop, func(int) { h.touch() }) })
	bg.Go(func() { h.every(45*time.Second, stop, func(int) { h.outputFlood(t) }) })
	bg.Go(func() { h.every(30*time.Second, stop, func(int) { h.sample(t, "") }) })
	wg.Wait()
	close(stop)
	bg.Wait()
	end := h.sample(t, "end (every session open)")
	h.minUpdates = -1
	for _, s := range h.sessions {
		h.stray.Add(s.stray())
		h.updates.Add(s.updates())
		if n := s.updates(); h.minUpdates < 0 || n < h.minUpdates {
			h.minUpdates = n
		}
		s.close()
	}
	d.awaitStatus(t, "every session ended", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 0 })
	idle := h.sample(t, "idle (sessions closed)")
	d.stop(t)
	left := h.leftovers(t)
	report := h.report(dur, total, start, end, idle, left)
	t.Log("\n" + report)
	if path := os.Getenv("SOAK_DOCS"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if h.lost.Load() != 0 || h.wrong.Load() != 0 || h.stray.Load() != 0 || len(left) != 0 {
		t.Errorf("%d responses lost, %d wrong, %d stray answers, %d processes left", h.lost.Load(), h.wrong.Load(), h.stray.Load(), len(left))
	}
	if h.outputFloodsCut.Load() != h.outputFloods.Load() || h.mostBuffered.Load() > 64_000_000+int64(total)<<16 {
		t.Errorf("%d of %d output floods cut off; the daemon buffered %d bytes at most", h.outputFloodsCut.Load(), h.outputFloods.Load(), h.mostBuffered.Load())
	}
}

func soakEnv(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	if n, err := strconv.Atoi(v); err == nil && name == "SOAK_SESSIONS" {
		return time.Duration(n)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// every calls f(1), f(2), … every period until stop.
func (h *soakHarness) every(period time.Duration, stop <-chan struct{}, f func(n int)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
			f(n)
		}
	}
}

// reload rewrites the configuration (its instructions change, so the
// servers are rebuilt) and sends SIGHUP.
func (h *soakHarness) reload(t *testing.T, n int) {
	h.d.writeConfig(t, h.config(n%2 == 1))
	if err := h.d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Errorf("reload: %v", err)
	}
	h.reloads.Add(1)
}

// kill sends SIGKILL to a hosted server, the fake and server-memory in
// turn, and notes when, so that the calls it fails are told from wrong
// answers.
func (h *soakHarness) kill(t *testing.T, n int) {
	name := []string{"fake", "memory"}[n%2]
	st, err := h.d.status(t.Context())
	if err != nil {
		t.Errorf("status: %v", err)
		return
	}
	u, _ := upstreamState(st, name)
	if u.PID == 0 {
		return
	}
	h.mu.Lock()
	h.killedAt[name] = append(h.killedAt[name], time.Now())
	h.groups[u.PID] = true
	h.mu.Unlock()
	if err := syscall.Kill(u.PID, syscall.SIGKILL); err == nil {
		h.kills.Add(1)
	}
}

// nearKill reports whether a hosted server was killed within the window
// around now in which its calls may fail.
func (h *soakHarness) nearKill(name string, at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.killedAt[name] {
		if at.After(k.Add(-2*time.Second)) && at.Before(k.Add(15*time.Second)) {
			return true
		}
	}
	return false
}

// touch rewrites the subscribed file: every session gets an update.
func (h *soakHarness) touch() {
	h.touches.Add(1)
	_ = os.WriteFile(filepath.Join(h.dir, "files", "ticker.txt"), []byte(time.Now().String()), 0o644)
}

// drive runs one session's calls until deadline, each followed by a pause
// of 1.5 to 4.5 s.
func (h *soakHarness) drive(s soakSession, i int, deadline time.Time) {
	r := rand.New(rand.NewPCG(uint64(i), 14))
	time.Sleep(time.Duration(r.IntN(3000)) * time.Millisecond)
	for id := int64(10); time.Now().Before(deadline); id++ {
		h.call(s, id, soakOps[pick(r)])
		time.Sleep(1500*time.Millisecond + time.Duration(r.IntN(3000))*time.Millisecond)
	}
}

// call makes one call and judges its answer.
func (h *soakHarness) call(s soakSession, id int64, op soakOp) {
	if _, isHTTP := s.(*httpSession); isHTTP && op.cancel {
		op = soakOps[0] // a legacy HTTP request is not cancelled by a notification of its own
	}
	line := op.line(h, id)
	if op.cancel {
		if err := s.cancel(id, line); err != nil {
			h.fail("cancel", err)
		}
		h.cancelled.Add(1)
		return
	}
	began := time.Now()
	a, err := s.roundTrip(id, line, time.Minute)
	took := time.Since(began)
	switch {
	case err != nil:
		h.lost.Add(1)
		h.fail(op.name+" lost", err)
	case op.check(h, id, a) == nil:
		if op.name != "progress" { // a sleep: its time is its own
			h.record(began, took)
		}
	case op.upstream != "" && h.nearKill(op.upstream, began):
		h.expected.Add(1) // its server was being killed
	default:
		h.wrong.Add(1)
		h.fail(op.name+" wrong", fmt.Errorf("%v: %.300s %+v", op.check(h, id, a), a.r.Result, a.r.Error))
	}
}

// fail keeps the first problems for the report.
func (h *soakHarness) fail(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.problems) < 10 {
		h.problems = append(h.problems, what+": "+err.Error())
	}
}

// leftovers are the processes of any hosted server's group, or running a
// hosted server or the exec tool, after the daemon has exited.
func (h *soakHarness) leftovers(t *testing.T) []string {
	var left []string
	all, err := proc.Processes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		h.mu.Lock()
		inGroup := h.groups[p.PGID]
		h.mu.Unlock()
		if inGroup || strings.Contains(string(cmdline), h.fake) || strings.Contains(string(cmdline), h.memory) ||
			strings.Contains(string(cmdline), "soak-exec") {
			if proctest.Alive(p.PID) {
				left = append(left, fmt.Sprintf("%d %q", p.PID, strings.ReplaceAll(string(cmdline), "\x00", " ")))
			}
		}
	}
	return left
}
