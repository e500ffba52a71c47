package upstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/server"
)

// State is an upstream instance's state (docs/upstreams.md §8).
type State string

// The states.
const (
	StateStopped  State = "stopped"  // no process; lazy and manual instances start here
	StateStarting State = "starting" // spawned: era probe, handshake, listing
	StateReady    State = "ready"    // serving
	StateBackoff  State = "backoff"  // exited or failed to start; the next attempt is scheduled
	StateFailed   State = "failed"   // restart.max_attempts failures in a row: no automatic restart
	StateDisabled State = "disabled" // disabled in the configuration
	StateDraining State = "draining" // replaced or removed by a reload: finishing its requests
)

// instance is one child process of an upstream over its life, for one
// share key (docs/upstreams.md §3), or one connection to a remote server
// (remote.go): its state, its process or connection when running, its
// restart history and its gate. The supervision loop (instance_run.go)
// runs as a suture service under the upstream's supervisor and is the
// only writer of state transitions other than draining; requests read
// the state and ask for starts (acquire).
type instance struct {
	u *upstream
	// key is the share key: "" for share = "all", the rendered
	// configuration's digest for "cwd", "session <id>" for "session".
	key string
	// label is what status shows for the key: "all", the directory,
	// "session 7".
	label string
	// cwd is the client directory it was rendered for; cmd the command.
	cwd   string
	cmd   mcpclient.Command
	roots []string
	gate  *gate

	// want is 1-buffered: a request, a manual start or an eager start
	// asks the loop to start the process.
	want chan struct{}
	// control carries stop, restart and drain orders to the loop.
	control chan order

	mu    sync.Mutex
	state State
	conn  *mcpclient.Conn
	// sandboxReport is the launcher's report of its last start (nil
	// before one, or unconfined).
	sandboxReport *sandbox.Report
	// pid is the process of the start under way (ConnConfig.Spawned),
	// before conn is set: status shows it; 0 otherwise.
	pid int
	// abortStart ends the start under way, with its cause (a drain or a
	// stop order, which must not wait for start_timeout); nil when none.
	abortStart context.CancelCauseFunc
	// gone is set when the loop has ended for good (drained, its session
	// ended, shutdown): nothing will start it again.
	gone         bool
	changed      chan struct{} // closed and replaced at every change
	failures     int           // consecutive failed starts or crashes
	firstFailure time.Time
	cause        string // why the last start failed or the process ended
	lastExit     *mcpclient.ExitError
	retryAt      time.Time // the next automatic attempt, in backoff
	lastAttempt  time.Time
	readySince   time.Time
	restarts     int
	starts       int  // starts attempted, for a request's one attempt of a failed one
	loginNeeded  bool // the last start failed for want of a login (a remote server)
	manual       bool // held stopped by start = "manual" or snodod upstream stop
	lastUsed     time.Time
	relaying     int            // relayed requests between acquire and their end
	owners       []*owner       // theirs, oldest first
	subs         map[string]int // upstream subscriptions: URI → sessions
	resyncing    map[string]int // list method → 1 running, 2 running and asked again
	listenCancel func()         // ends a 2026 upstream's listen stream
	stats        counters

	// manualRestarts are the restarts of a running process that snodod
	// upstream restart (or start) ordered, counted in restarts too.
	manualRestarts int

	// sessionless queues the upstream's requests for calls that come
	// from no Session (requests.go).
	sessionless clientQueue
}

// order is a request to the supervision loop.
type order int

const (
	orderStop order = iota + 1
	orderRestart
	orderDrain
)

// counters are what status shows besides the state.
type counters struct {
	unattributed int // server→client requests that could not be attributed
	dropped      int // notifications dropped
	refused      int // server→client requests refused: the session's queue was full
}

func newInstance(u *upstream, key, label, cwd string, cmd mcpclient.Command, roots []string) *instance {
	lim := u.m.limits.Load()
	in := &instance{
		u: u, key: key, label: label, cwd: cwd, cmd: cmd, roots: roots,
		gate:    newGate(lim.MaxInFlight, lim.MaxQueued),
		want:    make(chan struct{}, 1),
		control: make(chan order, 4),
		state:   StateStopped,
		changed: make(chan struct{}),
		manual:  u.conf().Start == "manual",
		subs:    map[string]int{},
	}
	if u.conf().Disabled {
		in.state = StateDisabled
	}
	return in
}

// setLocked changes the state and wakes every waiter; in.mu is held.
func (in *instance) setLocked(s State) {
	in.state = s
	close(in.changed)
	in.changed = make(chan struct{})
}

// stateSnapshot is an instance's state at one moment, for messages and
// status.
type stateSnapshot struct {
	state       State
	manual      bool
	cause       string
	failures    int
	failureSpan time.Duration
	retryIn     time.Duration
	lastExit    string
	stderrTail  string // snapshot's: at most maxStderrTail bytes, from a rune boundary
	loginNeeded bool
}

func (in *instance) snapshotLocked(now time.Time) *stateSnapshot {
	s := &stateSnapshot{state: in.state, manual: in.manual, cause: in.cause, failures: in.failures, loginNeeded: in.loginNeeded}
	if in.failures > 0 {
		s.failureSpan = now.Sub(in.firstFailure)
	}
	switch in.state {
	case StateBackoff:
		s.retryIn = max(in.retryAt.Sub(now), 0)
	case StateFailed:
		if next := in.lastAttempt.Add(in.u.conf().Restart.MaxDelay); next.After(now) {
			s.retryIn = next.Sub(now)
		}
	}
	if in.lastExit != nil {
		s.lastExit = in.lastExit.Error()
	}
	return s
}

// snapshot is the state now with the upstream's stderr tail, for a
// failure's message and detail; the ring is read outside in.mu, and only
// here (status has no use for it).
func (in *instance) snapshot() *stateSnapshot {
	in.mu.Lock()
	s := in.snapshotLocked(time.Now())
	in.mu.Unlock()
	s.stderrTail = in.u.ring.Tail(maxStderrTail)
	return s
}

// unavailable is the failure of a request this instance cannot serve now.
func (in *instance) unavailable() *failure {
	s := in.snapshot()
	if s.loginNeeded && s.state == StateFailed {
		f := in.failure(CodeUnavailable, loginHint(in.u.name), s)
		f.login = true
		return f
	}
	return in.failure(CodeUnavailable, unavailableMessage(in.u.name, s), s)
}

func (in *instance) failure(code int64, msg string, s *stateSnapshot) *failure {
	d := Detail{Name: in.u.name, State: string(s.state), Instance: in.label, Attempts: s.failures,
		LastExit: s.lastExit, StderrTail: s.stderrTail}
	if s.retryIn > 0 {
		ms := s.retryIn.Milliseconds()
		d.RetryInMs = &ms
	}
	return &failure{code: code, message: msg, detail: d}
}

// failureNow is a failure with a message of its own and the current
// state's detail.
func (in *instance) failureNow(code int64, msg string) *failure {
	return in.failure(code, msg, in.snapshot())
}

// errStopped ends acquire for an instance that is gone (its session ended,
// or it was drained).
var errStopped = errors.New("upstream instance stopped")

// forever is acquire's backoff bound that waits for any scheduled restart.
const forever = time.Duration(math.MaxInt64)

// acquire returns the running connection, starting the process when it is
// stopped (lazy start) or failed long enough ago (one on-demand attempt per
// restart.max_delay), and waiting while it starts (docs/upstreams.md §7):
// with a progressToken, the client gets progress "starting NAME". In
// backoff it waits for the scheduled restart when that is due within
// backoff (a call right after a crash: its request_timeout; the one retry
// of a side-effect-free request: forever), and fails at once otherwise, as
// it does when failed, and as it does when a start it waited for failed. waited reports that it did not find the instance
// ready at once (the caller's deadline may need extending). A client whose
// ctx ends gets ctx's error; the start goes on.
func (in *instance) acquire(ctx context.Context, backoff time.Duration) (conn *mcpclient.Conn, waited bool, err error) {
	reported, started := false, false
	firstStart := -1 // in.starts when the request first looked
	// demand asks the loop for a start, unless upstreams.max_children
	// processes run; in.mu is held, and released on failure.
	demand := func() error {
		if !in.u.isRemote() && in.u.m.atChildLimit() {
			in.mu.Unlock()
			return in.u.m.childrenFull(in)
		}
		in.ask()
		return nil
	}
	for {
		now := time.Now()
		in.mu.Lock()
		state, changed := in.state, in.changed
		if firstStart < 0 {
			firstStart = in.starts
		}
		if in.gone {
			in.mu.Unlock()
			return nil, waited, errStopped
		}
		switch state {
		case StateReady:
			conn := in.conn
			in.lastUsed = now
			in.mu.Unlock()
			return conn, waited, nil
		case StateStopped:
			if in.manual {
				in.mu.Unlock()
				return nil, waited, in.unavailable()
			}
			if err := demand(); err != nil {
				return nil, waited, err
			}
		case StateStarting:
			started = true
		case StateBackoff:
			// One restart is waited for: after a start that failed
			// too, the request fails with its cause.
			if started || in.retryAt.Sub(now) > backoff {
				in.mu.Unlock()
				return nil, waited, in.unavailable()
			}
		case StateFailed:
			// A server that needs a login is tried again at each request
			// (once per request: the authorization fails at once, without
			// traffic, until a login, here or in another process, is done).
			retryLogin := in.loginNeeded && in.starts == firstStart
			if !retryLogin && now.Sub(in.lastAttempt) < in.u.conf().Restart.MaxDelay {
				in.mu.Unlock()
				return nil, waited, in.unavailable()
			}
			if err := demand(); err != nil {
				return nil, waited, err
			}
		default: // disabled, draining
			in.mu.Unlock()
			return nil, waited, in.unavailable()
		}
		in.mu.Unlock()
		waited = true
		if !reported && state != StateBackoff && ctx.Err() == nil {
			reported = true
			_ = server.ReportProgress(ctx, server.Progress{Progress: 0, Message: "starting " + in.u.name})
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, waited, ctx.Err()
		case <-in.u.m.done:
			return nil, waited, errStopped
		}
	}
}

// listWaitUntil is how long a list (or a pass-through view's first
// initialize) waits for a never-listed instance (docs/upstreams.md §4,
// upstreams.list_wait): until wait after the start of its current start
// (a start someone else began counts from its beginning), or wait from now
// when it is about to start. An instance whose starts already failed, in
// backoff or failed, is not waited for at all: the list answers without it
// at once, and list_changed follows when it arrives. ok is false when the
// list should not wait.
func listWaitUntil(state State, failures int, startBegan, now time.Time, wait time.Duration) (until time.Time, ok bool) {
	if failures > 0 {
		return time.Time{}, false
	}
	switch state {
	case StateStopped:
		return now.Add(wait), true
	case StateStarting:
		until = startBegan.Add(wait)
		return until, until.After(now)
	}
	return time.Time{}, false
}

// listWait is listWaitUntil for in now.
func (in *instance) listWait(now time.Time, wait time.Duration) (time.Time, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return listWaitUntil(in.state, in.failures, in.lastAttempt, now, wait)
}

// abort ends the start under way, if any, with cause: a drain or a stop
// order acts at once instead of after start_timeout (docs/upstreams.md §4).
// The order itself still goes to the loop.
func (in *instance) abort(cause error) {
	in.mu.Lock()
	f := in.abortStart
	in.mu.Unlock()
	if f != nil {
		f(cause)
	}
}

// ask wakes the loop to start the process; in.mu may be held.
func (in *instance) ask() {
	select {
	case in.want <- struct{}{}:
	default:
	}
}

// send gives the loop an order without blocking; a full queue of orders
// already holds one that does as much.
func (in *instance) send(o order) {
	select {
	case in.control <- o:
	default:
	}
}

// begin and end bracket a relayed request, for the idle timer, the
// health pings and the attribution of log messages.
func (in *instance) begin(o *owner) {
	in.mu.Lock()
	in.relaying++
	in.owners = append(in.owners, o)
	in.lastUsed = time.Now()
	in.mu.Unlock()
}

func (in *instance) end(o *owner) {
	in.mu.Lock()
	in.relaying--
	for i, x := range in.owners {
		if x == o {
			in.owners = append(in.owners[:i], in.owners[i+1:]...)
			break
		}
	}
	in.lastUsed = time.Now()
	in.mu.Unlock()
}

// idleFor reports how long the instance has had nothing to do: no request
// and no subscription; 0 while busy.
func (in *instance) idleFor(now time.Time) time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.relaying > 0 || len(in.subs) > 0 {
		return 0
	}
	return now.Sub(in.lastUsed)
}

// String names the instance in logs.
func (in *instance) String() string { return fmt.Sprintf("upstream %s (%s)", in.u.name, in.label) }
