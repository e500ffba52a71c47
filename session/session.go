package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

// Defaults of the restart limits.
const (
	DefaultRestartIntensity = 5
	DefaultRestartWindow    = 10 * time.Second
)

// ErrTooManyFailures is Err's cause when a session failed more than
// RestartIntensity times within RestartWindow.
var ErrTooManyFailures = errors.New("session failed too often")

// Config is what every session of a daemon shares. Limits follow the
// net/http.Server convention: zero means the default, negative is refused
// (Validate; a session given an invalid Config ends at once, before any
// byte is read, with the error as Err).
type Config struct {
	// Dispatcher serves requests (required).
	Dispatcher server.Dispatcher
	// Executor runs requests; nil gives each transport instance its own.
	Executor *server.Executor

	// MaxLineBytes, MaxSubscriptions, WriteTimeout and ShutdownGrace are
	// the transport's limits (transport.md §15).
	MaxLineBytes, MaxSubscriptions int
	WriteTimeout, ShutdownGrace    time.Duration

	// RestartIntensity failures of the transport are allowed within
	// RestartWindow (defaults 5 and 10 s); the next one ends the session.
	RestartIntensity int
	RestartWindow    time.Duration

	// Logger receives the session's diagnostics; nil means slog.Default().
	Logger *slog.Logger

	// Ended, when set, is called once the session has ended for good and
	// closed its device, on the session's goroutine, after Done is closed.
	// It lets an owner forget the session without a goroutine per session
	// waiting on Done.
	Ended func(*Session)
}

// Validate reports every invalid field at once: the transport's limits
// with the messages of transport.md §15, and the restart limits.
func (c *Config) Validate() error {
	probe := stdio.Transport{
		In: strings.NewReader(""), Out: io.Discard, Dispatcher: c.Dispatcher,
		MaxLineBytes: c.MaxLineBytes, WriteTimeout: c.WriteTimeout,
		MaxSubscriptions: c.MaxSubscriptions, ShutdownGrace: c.ShutdownGrace,
	}
	errs := []error{probe.Validate()}
	if c.RestartIntensity < 0 {
		errs = append(errs, errors.New("restart_intensity must be a positive integer"))
	}
	if c.RestartWindow < 0 {
		errs = append(errs, errors.New("restart_window must be a positive duration"))
	}
	return errors.Join(errs...)
}

// Session serves one Device until the session ends for good. It is a
// suture.Service, to be added to the daemon's supervisor; it serves once.
//
// Its Serve runs the session's own supervisor, one per session, so one
// session's restarts never wait on another's. That supervisor's one service
// is the transport instance. An instance that fails (stdio.ErrSessionFailed:
// a coordinator panic, or Fault) has answered what it had in flight, and is
// restarted at once on the same Device, stdio.Reader and server.Session: no
// byte is lost and the client sees no close. End of input (EOF, a hang-up),
// a terminal write failure, the end of Serve's ctx (daemon shutdown: the
// transport drains within ShutdownGrace) or more than RestartIntensity
// failures within RestartWindow end the session: Serve closes the Device
// and returns suture.ErrDoNotRestart.
//
// The methods other than Serve may be called from any goroutine.
type Session struct {
	id      uint64
	dev     *Device
	cfg     Config
	log     *slog.Logger
	started time.Time

	rt       *server.Session // the runtime state every instance shares
	counters stdio.Counters  // the running instance's load
	restarts atomic.Int64

	fault   chan struct{} // Fault hands the running instance a failure
	serving atomic.Bool   // Serve was called
	slot    chan struct{} // held by the running instance
	final   chan struct{} // closed once an instance ended the session
	done    chan struct{} // closed once Serve has closed the device

	mu        sync.Mutex
	err       error       // why the session ended; set once, with final
	ended     bool        // final is closed
	failures  []time.Time // within the restart window, oldest first
	ownReader *stdio.Reader
	stopSup   context.CancelFunc // ends the session's supervisor
}

// New returns the session that will serve dev with id. The Session closes
// dev when it ends; Serve must be called (once) for that to happen.
func New(id uint64, dev *Device, cfg Config) *Session {
	if cfg.RestartIntensity == 0 {
		cfg.RestartIntensity = DefaultRestartIntensity
	}
	if cfg.RestartWindow == 0 {
		cfg.RestartWindow = DefaultRestartWindow
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Session{
		id:      id,
		dev:     dev,
		cfg:     cfg,
		log:     log.With("session", id),
		started: time.Now(),
		rt:      server.NewSession(cfg.MaxSubscriptions),
		fault:   make(chan struct{}),
		slot:    make(chan struct{}, 1),
		final:   make(chan struct{}),
		done:    make(chan struct{}),
	}
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
	if err := s.cfg.Validate(); err != nil {
		s.end(err)
		s.close()
		return suture.ErrDoNotRestart
	}
	s.mu.Lock()
	s.ownReader = stdio.NewReader(s.dev.input(), s.cfg.MaxLineBytes)
	s.mu.Unlock()
	s.log.Debug("session started", "kind", s.dev.Kind(), "pid", s.dev.peer.PID, "uid", s.dev.peer.UID)

	sup := suture.New(s.String(), suture.Spec{
		EventHook: s.event,
		// The session counts failures itself (RestartIntensity within
		// RestartWindow). suture's decaying count must never reach its
		// threshold: its backoff would delay a restart, or outlive the end.
		FailureThreshold: math.Inf(1),
		// How long the supervisor waits for the instance on shutdown
		// before it reports it; Serve itself always waits for it.
		Timeout: s.stopTimeout(),
	})
	sup.Add(&instance{s})
	// The supervisor runs on this goroutine (a session is one goroutine
	// fewer than with ServeBackground); end stops it once an instance has
	// ended the session, and ctx once the daemon shuts down.
	supCtx, stop := context.WithCancel(ctx)
	s.mu.Lock()
	s.stopSup = stop
	s.mu.Unlock()
	_ = sup.Serve(supCtx) // ctx's error, or nil: nothing to report
	stop()
	// suture gives up on an instance after its Timeout; the device must
	// not be closed under one that still runs, so wait for it here.
	s.slot <- struct{}{}
	s.close()
	return suture.ErrDoNotRestart
}

// stopTimeout is how long a draining instance may take: the grace period,
// then a few frames, each bounded by the write timeout.
func (s *Session) stopTimeout() time.Duration {
	grace := s.cfg.ShutdownGrace
	if grace <= 0 {
		grace = stdio.DefaultShutdownGrace
	}
	write := s.cfg.WriteTimeout
	if write <= 0 {
		write = stdio.DefaultWriteTimeout
	}
	return grace + 2*write + time.Second
}

// close releases what the session holds, the device last.
func (s *Session) close() {
	s.mu.Lock()
	reader := s.ownReader
	s.mu.Unlock()
	if reader != nil {
		reader.Close()
	}
	s.rt.Close()
	if err := s.dev.Close(); err != nil {
		s.log.Warn("closing the device failed", "err", err)
	}
	s.log.Debug("session ended", "err", s.Err(), "restarts", s.restarts.Load(),
		"bytes_in", s.dev.BytesIn(), "bytes_out", s.dev.BytesOut())
}

// end records why the session ended, once.
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended, s.err = true, err
		close(s.final)
		if s.stopSup != nil {
			s.stopSup()
		}
	}
}

// failed counts a failure of an instance and says what the instance
// returns to its supervisor: the error, to be restarted at once, or
// suture.ErrDoNotRestart once there were more than RestartIntensity
// failures within RestartWindow.
func (s *Session) failed(err error) error {
	now := time.Now()
	s.mu.Lock()
	keep := s.failures[:0]
	for _, t := range s.failures {
		if now.Sub(t) < s.cfg.RestartWindow {
			keep = append(keep, t)
		}
	}
	s.failures = append(keep, now)
	n := len(s.failures)
	s.mu.Unlock()
	if n > s.cfg.RestartIntensity {
		s.log.Error("session failed too often; ending it",
			"failures", n, "window", s.cfg.RestartWindow.String(), "device", s.dev.Kind(), "err", err)
		s.end(fmt.Errorf("%w: %d failures within %v: %w", ErrTooManyFailures, n, s.cfg.RestartWindow, err))
		return suture.ErrDoNotRestart
	}
	s.restarts.Add(1)
	s.log.Warn("session failed; restarting it on the same device", "err", err, "failures", n)
	return err
}

// event receives the session supervisor's events. Failures and restarts
// are logged by the session itself, once each; only a stuck instance is
// worth a line of suture's.
func (s *Session) event(e suture.Event) {
	if _, ok := e.(suture.EventStopTimeout); ok {
		s.log.Warn("session still draining after its stop timeout", "event", e.String())
		return
	}
	s.log.Debug("session supervisor", "event", e.String())
}

// Fault makes the running transport instance fail once, as a bug in its
// coordinator would: it answers what is in flight and is restarted. It
// exists for restart tests from outside (the daemon exposes it only when
// started with SNODOD_TEST_FAULTS=1). Fault returns once an instance took
// the failure, or once the session has ended; before Serve it waits for
// the first instance.
func (s *Session) Fault() {
	select {
	case s.fault <- struct{}{}:
	case <-s.final:
	case <-s.done:
	}
}

// Done is closed when the session has ended for good and its device is
// closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended: nil for end of input or shutdown, an
// *stdio.OutputError for a terminal write failure, ErrTooManyFailures, or
// an invalid Config. It is nil while the session runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// instance is the session supervisor's one service: one transport
// instance on the session's device, reader and runtime state.
type instance struct{ s *Session }

func (in *instance) String() string { return in.s.String() + " transport" }

func (in *instance) Serve(ctx context.Context) (err error) {
	s := in.s
	s.slot <- struct{}{}
	defer func() { <-s.slot }()
	defer func() {
		// The transport recovers its coordinator's panics; anything else
		// that panics here is a failure of the instance all the same.
		if v := recover(); v != nil {
			err = s.failed(fmt.Errorf("%w: %v", stdio.ErrSessionFailed, v))
		}
	}()
	s.mu.Lock()
	reader := s.ownReader
	s.mu.Unlock()
	tr := &stdio.Transport{
		Reader:           reader,
		Out:              s.dev.output(),
		Dispatcher:       s.cfg.Dispatcher,
		Executor:         s.cfg.Executor,
		MaxLineBytes:     s.cfg.MaxLineBytes,
		WriteTimeout:     s.cfg.WriteTimeout,
		MaxSubscriptions: s.cfg.MaxSubscriptions,
		ShutdownGrace:    s.cfg.ShutdownGrace,
		Session:          s.rt,
		Fault:            s.fault,
		Counters:         &s.counters,
		Logger:           s.log,
	}
	err = tr.Serve(ctx)
	if errors.Is(err, stdio.ErrSessionFailed) && ctx.Err() == nil {
		return s.failed(err)
	}
	if errors.Is(err, stdio.ErrSessionFailed) {
		err = nil // failed while shutting down: it ends all the same
	}
	var out *stdio.OutputError
	switch {
	case errors.As(err, &out):
		// The transport has logged the failure, with the session's id.
		s.log.Debug("session output failed; ending it", "err", err)
	case err != nil:
		s.log.Error("session cannot serve", "err", err)
	}
	s.end(err)
	return suture.ErrDoNotRestart
}
