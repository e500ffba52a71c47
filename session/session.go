package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// ErrTooManyFailures is Err's cause when a session failed more than
// RestartIntensity times within RestartWindow.
var ErrTooManyFailures = errors.New("session failed too often")

// Config is what every session of a daemon shares. Its Limits follow the
// net/http.Server convention: zero means the default, negative is refused
// (Validate; a session given an invalid Config ends at once, before any
// byte is read, with the error as Err).
type Config struct {
	// Dispatcher serves requests (required).
	Dispatcher server.Dispatcher
	// Caller is who asks (server.Caller): set on the session's runtime
	// state, for the hooks and handlers of a view that relays hosted
	// servers. Nil: nobody in particular.
	Caller *server.Caller
	// Executor runs requests; nil gives each transport instance its own.
	Executor *executor.Executor

	// Limits are the transport's limits (docs/transport.md §15) and the
	// restart limits: RestartIntensity failures of the transport are
	// allowed within RestartWindow (defaults 5 and 10 s); the next one
	// ends the session.
	Limits limits.Limits

	// Budget, when set, is shared by the sessions of a daemon: their
	// unfinished lines and pending output together stay within it
	// (daemon.max_buffered_bytes, stdio.Budget). Nil: each session is
	// bounded by its own limits alone.
	Budget *stdio.Budget

	// Logger receives the session's diagnostics; nil means slog.Default().
	Logger *slog.Logger

	// Ended, when set, is called once the session has ended for good and
	// closed its device, on the session's goroutine, after Done is closed.
	// It lets an owner forget the session without a goroutine per session
	// waiting on Done.
	Ended func(*Session)

	// Journal, when set, keeps a record of the session that outlives the
	// process (handover.go): it is told of the requests in flight and the
	// listen streams (stdio.Journal) and of every change of the runtime
	// state.
	Journal Journal
}

// Journal is a Config's record keeper: a stdio.Journal that is also told,
// by StateChanged, that the session's runtime state (what Snapshot
// returns) changed. StateChanged may be called from any goroutine, never
// with a lock of the session held; it must not block.
type Journal interface {
	stdio.Journal
	StateChanged()
}

// Validate reports every invalid field at once: each negative limit with
// the message of docs/transport.md §15, and a missing Dispatcher.
func (c *Config) Validate() error {
	errs := []error{c.Limits.Validate()}
	if c.Dispatcher == nil {
		errs = append(errs, errors.New("a session needs a Dispatcher"))
	}
	return errors.Join(errs...)
}

// Session serves one Device until the session ends for good. It is a
// suture.Service, to be added to the daemon's supervisor; it serves once.
//
// A session is its own supervisor: Serve runs one transport instance at a
// time on its own goroutine and restarts it there, so one session's
// restarts never wait on another's, and a session costs no goroutine for
// supervising. An instance that fails (stdio.ErrSessionFailed: a
// coordinator panic) has answered what it had in flight, and is
// restarted at once on the same Device, stdio.Reader and server.SessionState: no
// byte is lost and the client sees no close. End of input (EOF, a hang-up),
// a terminal write failure, the end of Serve's ctx (daemon shutdown: the
// transport drains within ShutdownGrace), Kill (no grace) or more than
// RestartIntensity failures within RestartWindow end the session: Serve
// closes the Device, logs one line saying why (see end.go) and returns
// suture.ErrDoNotRestart.
//
// The methods other than Serve may be called from any goroutine.
type Session struct {
	id      uint64
	dev     *Device
	cfg     Config
	log     *slog.Logger
	started time.Time

	rt       *server.SessionState // the runtime state every instance shares
	counters stdio.Counters       // the running instance's load
	restarts atomic.Int64

	fault *faults.Point // a test's injected failures; nil unless armed
	done  chan struct{} // closed once Serve has closed the device

	// The flags are together, so that a Session fits a smaller size class
	// of the allocator: an idle session is mostly what it holds.
	serving atomic.Bool // Serve was called
	ended   bool        // under mu, with err
	drained bool        // under mu: ended by the end of Serve's ctx
	moved   bool        // under mu: see handover

	mu        sync.Mutex
	err       error                   // why the session ended; set once, with ended
	cancel    context.CancelCauseFunc // ends the running instance; set by Serve
	killed    error                   // Kill's cause, for a Serve yet to start
	failures  []time.Time             // within the restart window, oldest first
	ownReader *stdio.Reader
	tr        stdio.Transport // set by Serve, used only by its goroutine

	// A hand-over (handover.go): HandOver's channel, set once it is asked
	// for; moved (with the flags above), once the session has gone to its
	// successor (its device is not closed); resume, what a resumed
	// session's first instance is given.
	handover chan handoverResult
	resume   *resumeState
}

// New returns the session that will serve dev with id. The Session closes
// dev when it ends; Serve must be called (once) for that to happen.
func New(id uint64, dev *Device, cfg Config) *Session {
	if cfg.Limits.Validate() == nil {
		cfg.Limits = cfg.Limits.WithDefaults() // else start ends the session
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Session{
		id:      id,
		dev:     dev,
		cfg:     cfg,
		log:     withSession(log, id),
		started: time.Now(),
		rt:      server.NewSessionState(cfg.Limits.MaxSubscriptions),
		done:    make(chan struct{}),
	}
	if cfg.Caller != nil && cfg.Caller.Kind == "" {
		// Before the session serves, as SetCaller's contract asks: the
		// device's kind is known here only (traces carry it).
		cfg.Caller.Kind = string(dev.Kind())
	}
	s.rt.SetCaller(cfg.Caller)
	s.fault = faults.New(s, s.done) // nil unless a test armed faults
	if cfg.Journal != nil {
		s.rt.SetOnChange(cfg.Journal.StateChanged)
	}
	return s
}

// Serve serves the device until the session ends, closes the device and
// returns suture.ErrDoNotRestart (a session never serves twice). Why it
// ended is in Err.
func (s *Session) Serve(ctx context.Context) error {
	if s.serving.Swap(true) {
		<-s.done
		return suture.ErrDoNotRestart
	}
	defer func() {
		close(s.done)
		if s.cfg.Ended != nil {
			s.cfg.Ended(s)
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	s.cancel = cancel
	switch {
	case s.killed != nil:
		cancel(s.killed)
	case s.handover != nil:
		cancel(stdio.ErrHandOver)
	}
	s.mu.Unlock()
	// Serve keeps its frame small (see start): an idle session's
	// coordinator runs on this goroutine, and its stack is most of what an
	// idle session costs.
	if s.start() {
		for s.serveInstance(ctx) {
		}
	}
	s.close()
	return suture.ErrDoNotRestart
}

// start prepares what every instance shares, or ends the session when its
// Config is invalid.
func (s *Session) start() bool {
	if err := s.cfg.Validate(); err != nil {
		s.end(err)
		return false
	}
	var resume *stdio.Resume
	s.mu.Lock()
	if r := s.resume; r != nil {
		s.ownReader = s.cfg.Budget.NewReaderFrom(s.dev.input(), s.cfg.Limits.MaxLineBytes, r.input)
		resume = r.transport(s.log)
		s.resume = nil
	} else {
		s.ownReader = s.cfg.Budget.NewReader(s.dev.input(), s.cfg.Limits.MaxLineBytes) // a nil budget is none
	}
	s.mu.Unlock()
	// Every instance serves with the same Transport, kept in the Session
	// rather than on Serve's stack.
	s.tr = stdio.Transport{
		Reader:     s.ownReader,
		Out:        s.dev.output(),
		Dispatcher: s.cfg.Dispatcher,
		Executor:   s.cfg.Executor,
		Limits:     s.cfg.Limits,
		State:      s.rt,
		Counters:   &s.counters,
		Resume:     resume,
		Journal:    s.cfg.Journal, // a nil Journal converts to a nil stdio.Journal
		Logger:     s.log,
	}
	s.log.Debug("session started", "kind", s.dev.Kind(), "pid", s.dev.peer.PID, "uid", s.dev.peer.UID)
	return true
}

// close releases what the session holds, the device last.
func (s *Session) close() {
	s.mu.Lock()
	reader, moved := s.ownReader, s.moved
	s.mu.Unlock()
	if reader != nil {
		reader.Close()
	}
	s.rt.Close()
	s.fault.Release()
	if !moved {
		if err := s.dev.Close(); err != nil {
			s.log.Warn("closing the device failed", "err", err)
		}
	}
	s.logEnd()
}

// end records why the session ended, once.
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended, s.err = true, err
	}
}

// failed counts a failure of an instance and says whether to restart it:
// at once, unless there were more than RestartIntensity failures within
// RestartWindow (then the session has ended).
func (s *Session) failed(err error) (restart bool) {
	now := time.Now()
	s.mu.Lock()
	keep := s.failures[:0]
	for _, t := range s.failures {
		if now.Sub(t) < s.cfg.Limits.RestartWindow {
			keep = append(keep, t)
		}
	}
	s.failures = append(keep, now)
	n := len(s.failures)
	s.mu.Unlock()
	if n > s.cfg.Limits.RestartIntensity {
		s.log.Error("session failed too often; ending it",
			"failures", n, "window", s.cfg.Limits.RestartWindow.String(), "device", s.dev.Kind(), "err", err)
		s.end(fmt.Errorf("%w: %d failures within %v: %w", ErrTooManyFailures, n, s.cfg.Limits.RestartWindow, err))
		return false
	}
	s.restarts.Add(1)
	s.log.Warn("session failed; restarting it on the same device", "err", err, "failures", n)
	return true
}

// Done is closed when the session has ended for good and its device is
// closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended: nil for end of input or shutdown, an
// *stdio.OutputError for a terminal write failure, ErrTooManyFailures, an
// error matching stdio.ErrKilled after Kill, or an invalid Config. It is
// nil while the session runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// serveInstance runs one transport instance on the session's device,
// reader and runtime state, and says whether to start another.
func (s *Session) serveInstance(ctx context.Context) (restart bool) {
	defer func() {
		// The transport recovers its coordinator's panics; anything else
		// that panics here is a failure of the instance all the same.
		if v := recover(); v != nil {
			restart = s.failed(fmt.Errorf("%w: %v", stdio.ErrSessionFailed, v))
		}
	}()
	err := s.tr.Serve(faults.With(ctx, s.fault))
	s.tr.Resume = nil // the first instance's only
	return s.after(ctx, err)
}

// after takes an instance's end: a failure is restarted (or ends a session
// that fails too often), anything else ends the session.
func (s *Session) after(ctx context.Context, err error) (restart bool) {
	if errors.Is(context.Cause(ctx), stdio.ErrHandOver) && s.handingOver() {
		var h *stdio.Handoff
		switch {
		case errors.As(err, &h):
			s.handedOver(h.Streams)
			return false
		case err == nil, errors.Is(err, stdio.ErrSessionFailed):
			// Failed while pausing: it answered everything, ended its
			// streams, and the device is handed over all the same.
			s.handedOver(nil)
			return false
		}
		// An output failure: the device is dead, and the session ends.
		s.mu.Lock()
		result := s.handover
		s.mu.Unlock()
		defer func() { result <- handoverResult{err: fmt.Errorf("%w: %w", ErrNotHandedOver, err)} }()
	}
	if errors.Is(err, stdio.ErrSessionFailed) {
		if ctx.Err() == nil {
			return s.failed(err)
		}
		err = nil // failed while shutting down: it ends all the same
	}
	if err == nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, stdio.ErrKilled) {
			err = cause
		} else {
			s.mu.Lock()
			s.drained = true
			s.mu.Unlock()
		}
	}
	var out *stdio.OutputError
	switch {
	case errors.Is(err, stdio.ErrKilled):
	case errors.As(err, &out):
		// The transport has logged the failure, with the session's id.
		s.log.Debug("session output failed; ending it", "err", err)
	case err != nil:
		s.log.Error("session cannot serve", "err", err)
	}
	s.end(err)
	return false
}
