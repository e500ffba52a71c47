package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/mcpclient"
)

// Health pings (docs/upstreams.md §4): any answer is alive; pingFailures
// consecutive pings without one within pingTimeout kill the process.
const (
	pingTimeout  = 10 * time.Second
	pingFailures = 3
)

// Serve is the instance's supervision loop, a suture service that never
// asks suture to restart it: restarts follow the upstream's own backoff
// (docs/upstreams.md §4), which suture's does not express. It returns
// suture.ErrDoNotRestart when ctx ends (shutdown: the process is stopped
// within the drain grace), when the instance is drained by a reload, or
// when its session ended.
func (in *instance) Serve(ctx context.Context) error {
	defer in.finish()
	in.mu.Lock()
	disabled := in.state == StateDisabled
	in.gone = false // suture restarts a loop that panicked
	in.mu.Unlock()
	if disabled {
		<-ctx.Done()
		return suture.ErrDoNotRestart
	}
	ok, eager := in.serveAdopted(ctx)
	if !ok {
		return suture.ErrDoNotRestart
	}
	eager = eager || in.u.startEagerly(in)
	for {
		if !in.waitForStart(ctx, eager) {
			return suture.ErrDoNotRestart
		}
		eager = false
		conn, err := in.spawn(ctx)
		if err != nil {
			switch {
			case ctx.Err() != nil, errors.Is(err, errRetired):
				return suture.ErrDoNotRestart
			case errors.Is(err, errStopOrdered):
				in.mu.Lock()
				in.manual = true
				in.setLocked(StateStopped)
				in.mu.Unlock()
			case !errors.Is(err, errNoChildSlot):
				in.failed(err, nil)
			}
			continue
		}
		if !in.serve(ctx, conn) {
			return suture.ErrDoNotRestart
		}
	}
}

// finish leaves the instance stopped (or disabled), with no process, for
// good: requests still waiting for it give up (acquire).
func (in *instance) finish() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.conn, in.gone = nil, true
	if in.state != StateDisabled {
		in.setLocked(StateStopped)
	}
}

// waitForStart waits for a reason to start the process: a request or a
// manual start (want), the end of a backoff, or eager. It returns false
// when the loop should end.
func (in *instance) waitForStart(ctx context.Context, eager bool) bool {
	for {
		in.mu.Lock()
		state, retryAt := in.state, in.retryAt
		in.mu.Unlock()
		if eager {
			return true
		}
		var backoff <-chan time.Time
		if state == StateBackoff {
			// No Stop needed: an unfired timer is collected (Go 1.23).
			backoff = time.After(time.Until(retryAt))
		}
		select {
		case <-ctx.Done():
			return false
		case <-in.want:
			in.mu.Lock()
			stale := in.manual // asked before a stop order came through
			in.mu.Unlock()
			if !stale {
				return true
			}
		case <-backoff:
			return true
		case o := <-in.control:
			switch o {
			case orderStop:
				in.mu.Lock()
				in.manual = true
				in.setLocked(StateStopped)
				in.mu.Unlock()
			case orderRestart:
				in.mu.Lock()
				in.manual, in.failures = false, 0
				in.mu.Unlock()
				return true
			case orderDrain:
				return false
			}
		}
	}
}

// errNoChildSlot is a start refused by upstreams.max_children; the
// waiting requests get -31002 from acquire.
var errNoChildSlot = errors.New("upstreams.max_children reached")

// The causes of a start aborted by an order (instance.abort): the
// instance was drained by a reload (removed or replaced), or stopped by
// snodod upstream stop.
var (
	errRetired     = errors.New("removed or replaced by a reload while it was starting")
	errStopOrdered = errors.New("stopped while it was starting")
)

// spawn starts the process and lists its catalog, within start_timeout.
func (in *instance) spawn(ctx context.Context) (*mcpclient.Conn, error) {
	m := in.u.m
	remote := in.u.isRemote()
	if !remote && !m.reserveChild() {
		in.mu.Lock()
		in.setLocked(in.state) // waiters re-check, and find the limit
		in.mu.Unlock()
		return nil, errNoChildSlot
	}
	timeout := in.u.conf().StartTimeout
	timed, cancelTimeout := context.WithTimeout(ctx, timeout)
	defer cancelTimeout()
	startCtx, abort := context.WithCancelCause(timed)
	defer abort(nil)
	in.mu.Lock()
	in.lastAttempt = time.Now()
	in.starts++
	in.abortStart = abort
	in.setLocked(StateStarting)
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		in.pid, in.abortStart = 0, nil
		in.mu.Unlock()
	}()
	in.u.ring.Mark(fmt.Sprintf("snodod: starting %s (instance %s)", in.u.name, in.label))
	conn, err := in.connect(startCtx, func(pid int) {
		in.mu.Lock()
		in.pid = pid
		in.mu.Unlock()
	})
	if err == nil {
		var cat *catalog
		if cat, err = listCatalog(startCtx, conn, in.u.m.log.With("upstream", in.u.name)); err == nil {
			in.u.listed(cat)
			in.mu.Lock()
			in.conn, in.readySince, in.lastUsed = conn, time.Now(), time.Now()
			in.pid, in.abortStart, in.loginNeeded = 0, nil, false
			in.setLocked(StateReady)
			in.mu.Unlock()
			in.resubscribe(conn)
			where := fmt.Sprintf("pid %d", conn.PID())
			if remote {
				where = mcpclient.RedactURL(in.u.conf().Remote.URL)
			}
			in.u.ring.Mark(fmt.Sprintf("snodod: %s ready (%s)", in.u.name, where))
			attrs := []any{"upstream", in.u.name, "instance", in.label, "pid", conn.PID(), "era", conn.Era(), "version", conn.Version()}
			if in.u.sandboxed() {
				attrs = append(attrs, "sandbox", string(in.u.sandbox.Level))
			}
			m.log.Info("upstream ready", attrs...)
			return conn, nil
		}
		stopNow(conn)
	}
	if !remote {
		m.releaseChild()
	}
	if cause := context.Cause(startCtx); errors.Is(cause, errRetired) || errors.Is(cause, errStopOrdered) {
		m.log.Info("upstream start aborted", "upstream", in.u.name, "instance", in.label, "cause", cause)
		return nil, cause
	}
	if errors.Is(startCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("did not finish starting within %s (start_timeout): %w", shortDuration(timeout), err)
	}
	return nil, err
}

// serve watches a ready process until it ends, is stopped or is drained,
// with the idle timer and the health pings. It returns false when the loop
// should end.
func (in *instance) serve(ctx context.Context, conn *mcpclient.Conn) bool {
	cfg := in.u.conf()
	if !in.u.isRemote() {
		defer in.u.m.releaseChild()
	}
	var idle, ping <-chan time.Time
	if cfg.IdleTimeout > 0 {
		t := time.NewTicker(min(max(cfg.IdleTimeout/8, 10*time.Millisecond), time.Minute))
		defer t.Stop()
		idle = t.C
	}
	if cfg.PingInterval > 0 {
		t := time.NewTicker(cfg.PingInterval)
		defer t.Stop()
		ping = t.C
	}
	reset := time.NewTimer(cfg.Restart.ResetAfter)
	defer reset.Stop()
	pinged := make(chan error, 1)
	pinging, missed := false, 0
	for {
		select {
		case <-conn.Done():
			in.failed(conn.Err(), conn)
			return true
		case <-ctx.Done():
			if !in.keep(conn) { // an upgrade hands it over (instance_handover.go)
				in.stop(conn, false)
			}
			return false
		case o := <-in.control:
			switch o {
			case orderStop:
				in.stop(conn, true)
				return true
			case orderRestart:
				in.stop(conn, false)
				in.mu.Lock()
				in.failures = 0
				in.restarts++ // a restart too, as a crash's is
				in.manualRestarts++
				in.mu.Unlock()
				in.ask()
				return true
			case orderDrain:
				in.drain(conn)
				return false
			}
		case now := <-idle:
			if in.idleFor(now) >= cfg.IdleTimeout {
				in.u.m.log.Info("upstream idle; stopping it", "upstream", in.u.name, "instance", in.label, "idle_timeout", shortDuration(cfg.IdleTimeout))
				in.stop(conn, false)
				return true
			}
		case <-ping:
			if pinging || conn.InFlight() > 0 || in.busy() {
				continue
			}
			pinging = true
			go func() {
				pctx, cancel := context.WithTimeout(context.Background(), in.u.m.pingTimeout())
				defer cancel()
				pinged <- conn.Ping(pctx)
			}()
		case err := <-pinged:
			pinging = false
			switch {
			case err == nil:
				missed = 0
			case errors.Is(err, context.DeadlineExceeded):
				missed++
				in.u.m.log.Warn("upstream did not answer a ping", "upstream", in.u.name, "instance", in.label, "missed", missed)
				if missed >= pingFailures {
					in.u.m.log.Error("upstream unresponsive: killing it", "upstream", in.u.name, "instance", in.label)
					stopNow(conn) // Done follows: a crash
				}
			}
		case <-reset.C:
			in.mu.Lock()
			in.failures = 0
			in.mu.Unlock()
		}
	}
}

// pingTimeout is how long a health ping waits for its answer.
func (m *Manager) pingTimeout() time.Duration {
	if d := m.pingWait.Load(); d > 0 {
		return time.Duration(d)
	}
	return pingTimeout
}

// busy reports relayed requests in flight.
func (in *instance) busy() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.relaying > 0
}

// stop ends a ready process gracefully; the instance is stopped first, so
// that a request arriving meanwhile starts a new one.
func (in *instance) stop(conn *mcpclient.Conn, manual bool) {
	in.mu.Lock()
	in.conn = nil
	in.manual = in.manual || manual
	in.setLocked(StateStopped)
	in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), in.u.m.stopGrace())
	defer cancel()
	conn.Stop(ctx)
}

// drain lets a replaced or removed instance finish its requests, up to
// upstreams.drain_timeout, then stops it.
func (in *instance) drain(conn *mcpclient.Conn) {
	in.mu.Lock()
	in.setLocked(StateDraining)
	in.mu.Unlock()
	deadline := time.Now().Add(in.u.m.limits.Load().DrainTimeout)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) && (in.busy() || conn.InFlight() > 0) {
		select {
		case <-conn.Done():
			return
		case <-t.C:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), in.u.m.stopGrace())
	defer cancel()
	conn.Stop(ctx)
}

// stopNow kills the process group at once.
func stopNow(conn *mcpclient.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	conn.Stop(ctx)
}

// failed records a failed start (conn nil) or the end of a process, and
// schedules the next attempt: backoff after 1 s, 2 s, 4 s … up to
// restart.max_delay with ±20 % jitter, or failed after
// restart.max_attempts failures in a row.
func (in *instance) failed(err error, conn *mcpclient.Conn) {
	now := time.Now()
	cfg := in.u.conf().Restart
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.state == StateStopped && conn != nil {
		return // stopped on purpose (idle, manual): not a failure
	}
	var exit *mcpclient.ExitError
	errors.As(err, &exit)
	in.lastExit, in.cause, in.conn = exit, err.Error(), nil
	in.loginNeeded = conn == nil && loginRequired(err)
	switch {
	case in.loginNeeded:
		in.cause = strings.TrimPrefix(loginHint(in.u.name), "snodod: ")
	case exit != nil && conn != nil && in.u.isRemote():
		in.cause = "lost its connection: " + exit.Error()
		in.restarts++
	case exit != nil && conn != nil:
		in.cause = "exited with " + exitWords(exit)
		in.restarts++
	}
	if conn == nil && !in.loginNeeded {
		in.cause += in.u.offlineHint()
	}
	in.u.ring.Mark(fmt.Sprintf("snodod: %s %s", in.u.name, in.cause))
	if in.failures == 0 {
		in.firstFailure = now
	}
	in.failures++
	if in.loginNeeded {
		// Nobody but a person can help: no automatic attempts; a
		// request, or a login (LoggedIn), tries again.
		in.setLocked(StateFailed)
		in.u.m.log.Warn("remote server needs a login", "upstream", in.u.name, "instance", in.label, "hint", "snodod login "+in.u.name)
		return
	}
	if in.failures >= cfg.MaxAttempts {
		in.setLocked(StateFailed)
		in.u.m.log.Error("upstream failed: no more automatic restarts", "upstream", in.u.name, "instance", in.label,
			"failures", in.failures, "cause", in.cause)
		return
	}
	in.retryAt = now.Add(backoffDelay(cfg.InitialDelay, cfg.MaxDelay, in.failures))
	in.setLocked(StateBackoff)
	in.u.m.log.Warn("upstream unavailable; restarting it after a delay", "upstream", in.u.name, "instance", in.label,
		"failures", in.failures, "cause", in.cause, "delay", in.retryAt.Sub(now).Round(time.Millisecond))
}

// backoffDelay is the delay before attempt n+1: initial·2^(n-1), at most
// maxDelay, ±20 % jitter.
func backoffDelay(initial, maxDelay time.Duration, n int) time.Duration {
	d := initial
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
