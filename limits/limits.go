// Package limits is the one description of every configurable limit of a
// session, the shared executor and the daemon: its configuration key, its
// command-line flag, its default, what it means and what it allows.
//
// It is a leaf (it imports only the standard library) because every layer
// reads it: config builds its keys, defaults, validation messages and
// docs/config.md's rows from All; the CLI builds the limit flags of both
// `snodod serve` and `snodod stdio` from it; the transport, the session and
// the daemon take a Limits and fill its zero fields with WithDefaults.
// Adding a limit is a field in Limits and an entry in All.
//
// A Limits is a plain value: it may be copied and read concurrently.
package limits

import (
	"errors"
	"strings"
	"time"
)

// The defaults (docs/transport.md §15), also in All.
const (
	DefaultMaxLineBytes     = 2_000_000
	DefaultWriteTimeout     = 5 * time.Second
	DefaultMaxSubscriptions = 32
	DefaultRequestTimeout   = 30 * time.Second
	DefaultRestartIntensity = 5
	DefaultRestartWindow    = 10 * time.Second
	DefaultMaxConcurrency   = 32
	DefaultMaxQueue         = 256
	DefaultMaxSessions      = 1024
	// DefaultMaxSessionsPerUID is a quarter of DefaultMaxSessions: one
	// local user (or one of its processes gone wild) cannot take every
	// session from the others.
	DefaultMaxSessionsPerUID = 256
	// DefaultInitializeTimeout is long enough for a client that starts
	// its connection before its user asks for anything (an editor's
	// startup), short enough that idle connections do not pile up.
	DefaultInitializeTimeout = 30 * time.Second
	DefaultShutdownGrace     = 10 * time.Second
	DefaultUpgradeGrace      = 10 * time.Second
	// DefaultMaxBufferedBytes is 32 unfinished lines of the default line
	// limit: room for several clients sending large requests at once,
	// while a local user opening a thousand connections that each hold
	// most of a line can no longer make the daemon hold two gigabytes.
	DefaultMaxBufferedBytes = 64_000_000
	// DefaultMaxPendingOutputBytes is four lines of the default line
	// limit: a connection whose reader is slow keeps a few large answers
	// waiting, and a worker with one more waits for room instead of
	// growing the daemon (docs/transport.md §11.5).
	DefaultMaxPendingOutputBytes = 8_000_000
)

// Limits are the limits of a session's transport, of the shared executor
// and of the daemon. They follow the net/http.Server convention: zero means
// the default, negative is invalid (Validate). Each consumer reads the
// fields that concern it and ignores the others; All says which key and
// flag set each field.
type Limits struct {
	// MaxLineBytes bounds one input line, its newline included
	// (docs/transport.md §3.1).
	MaxLineBytes int
	// WriteTimeout bounds the writing of one frame; a frame that misses it
	// ends the connection (docs/transport.md §11.3).
	WriteTimeout time.Duration
	// MaxSubscriptions caps one connection's listen streams plus the
	// resource URIs it subscribed with resources/subscribe
	// (docs/protocol.md §9.5).
	MaxSubscriptions int
	// RequestTimeout bounds one request in the executor, from its start
	// (docs/transport.md §13.4).
	RequestTimeout time.Duration
	// RestartIntensity is how many times a failing session may be
	// restarted within RestartWindow; the next failure ends it. It plays
	// the role of suture's FailureThreshold, RestartWindow that of
	// FailureDecay.
	RestartIntensity int
	RestartWindow    time.Duration
	// MaxConcurrency is how many requests the executor runs at once.
	MaxConcurrency int
	// MaxQueue is how many admitted requests may wait for an executor
	// slot in the places every session shares; the daemon gives each
	// session places of its own besides (its sessionQueue). A request
	// beyond both is refused.
	MaxQueue int
	// MaxSessions is how many sessions the daemon serves at once.
	MaxSessions int
	// MaxSessionsPerUID is how many of them the peers of one uid may hold.
	MaxSessionsPerUID int
	// InitializeTimeout ends a session that has sent no request (a legacy
	// initialize, or a first 2026 request) this long after it connected.
	InitializeTimeout time.Duration
	// ShutdownGrace is how long admitted requests may still run once a
	// session is told to stop (a drain, a signal to `snodod stdio`).
	ShutdownGrace time.Duration
	// UpgradeGrace is how long a daemon being upgraded lets each
	// session's in-flight requests finish before it hands the session to
	// the new process; what still runs then is answered -32603 "snodod
	// restarted; this request was cancelled".
	UpgradeGrace time.Duration
	// MaxBufferedBytes bounds the bytes that all of the daemon's sessions
	// hold together in unfinished lines and in output waiting to be
	// written (transport/stdio.Budget). A line longer than it alone is
	// refused too, so below MaxLineBytes it is the effective line limit.
	MaxBufferedBytes int
	// MaxPendingOutputBytes bounds one connection's output committed and
	// not yet written: a result that would pass it waits, holding its
	// executor slot, until the writer has made room; a single result
	// larger than it is written alone (docs/transport.md §11.5).
	MaxPendingOutputBytes int
}

// Limit describes one field of Limits.
type Limit struct {
	// Key is the configuration key, section.leaf: "session.max_line_bytes".
	Key string
	// Flag is the command-line flag without dashes: "max-line-bytes".
	Flag string
	// Description is one sentence saying what the limit does, for
	// docs/config.md and the flags' help.
	Description string
	// Daemon is true for a limit only `snodod serve` applies (there is
	// one session and no restart in `snodod stdio`).
	Daemon bool
	// Default is the default, an int or a time.Duration.
	Default any

	field func(*Limits) any // *int or *time.Duration
}

// Leaf is the key without its section ("max_line_bytes"), as the
// transport's own messages name the limit (docs/transport.md §15).
func (l Limit) Leaf() string { return l.Key[strings.IndexByte(l.Key, '.')+1:] }

// IsDuration reports whether the limit is a time.Duration (else an int).
func (l Limit) IsDuration() bool {
	_, ok := l.Default.(time.Duration)
	return ok
}

// Allowed is what the limit accepts, in the words every message about it
// uses: "must be a positive integer" or "must be a positive duration".
func (l Limit) Allowed() string {
	if l.IsDuration() {
		return "must be a positive duration"
	}
	return "must be a positive integer"
}

// Field returns a pointer to the limit's field in ls: an *int or a
// *time.Duration.
func (l Limit) Field(ls *Limits) any { return l.field(ls) }

// all is in reference order: by section, as docs/config.md lists them.
var all = []Limit{
	{Key: "session.write_timeout", Flag: "write-timeout", Default: DefaultWriteTimeout,
		Description: "How long one outbound frame may take to write; a device that misses it is dead.",
		field:       func(l *Limits) any { return &l.WriteTimeout }},
	{Key: "session.max_line_bytes", Flag: "max-line-bytes", Default: DefaultMaxLineBytes,
		Description: "Longest request line accepted, in bytes, its newline included.",
		field:       func(l *Limits) any { return &l.MaxLineBytes }},
	{Key: "session.max_pending_output_bytes", Flag: "max-pending-output-bytes", Default: DefaultMaxPendingOutputBytes,
		Description: "Per connection: bytes of answers waiting for a slow reader; a result past it waits for room (a larger one is written alone), and one not written within session.write_timeout ends the session.",
		field:       func(l *Limits) any { return &l.MaxPendingOutputBytes }},
	{Key: "session.max_subscriptions", Flag: "max-subscriptions", Default: DefaultMaxSubscriptions,
		Description: "Per connection: open listen streams plus resource URIs subscribed with resources/subscribe.",
		field:       func(l *Limits) any { return &l.MaxSubscriptions }},
	{Key: "session.request_timeout", Flag: "request-timeout", Default: DefaultRequestTimeout,
		Description: "Deadline of one request in the shared executor.",
		field:       func(l *Limits) any { return &l.RequestTimeout }},
	{Key: "session.restart_intensity", Flag: "restart-intensity", Default: DefaultRestartIntensity, Daemon: true,
		Description: "Restarts of a failing session allowed within session.restart_window; the next failure ends it.",
		field:       func(l *Limits) any { return &l.RestartIntensity }},
	{Key: "session.restart_window", Flag: "restart-window", Default: DefaultRestartWindow, Daemon: true,
		Description: "The sliding window session.restart_intensity counts restarts in.",
		field:       func(l *Limits) any { return &l.RestartWindow }},
	{Key: "executor.max_concurrency", Flag: "max-concurrency", Default: DefaultMaxConcurrency,
		Description: "Requests the shared executor runs at once.",
		field:       func(l *Limits) any { return &l.MaxConcurrency }},
	{Key: "executor.max_queue", Flag: "max-queue", Default: DefaultMaxQueue,
		Description: "Requests that may wait for an executor slot in places every session shares; besides these, each session has 4 places of its own, so the queue holds up to max_queue + 4 × sessions and no session is refused while it has fewer than 4 waiting. A request beyond both is refused.",
		field:       func(l *Limits) any { return &l.MaxQueue }},
	{Key: "daemon.max_buffered_bytes", Flag: "max-buffered-bytes", Default: DefaultMaxBufferedBytes, Daemon: true,
		Description: "Bytes all sessions may hold together in unfinished lines and in output waiting for slow readers; past it, the longest unfinished line is refused (-32600, its next line is served) and output waits for room.",
		field:       func(l *Limits) any { return &l.MaxBufferedBytes }},
	{Key: "daemon.max_sessions", Flag: "max-sessions", Default: DefaultMaxSessions, Daemon: true,
		Description: "Sessions served at once; a client beyond it is refused with one line.",
		field:       func(l *Limits) any { return &l.MaxSessions }},
	{Key: "daemon.max_sessions_per_uid", Flag: "max-sessions-per-uid", Default: DefaultMaxSessionsPerUID, Daemon: true,
		Description: "Sessions the clients of one uid may hold at once (the session socket and snodod connect together); a client beyond it is refused with one line.",
		field:       func(l *Limits) any { return &l.MaxSessionsPerUID }},
	{Key: "daemon.initialize_timeout", Flag: "initialize-timeout", Default: DefaultInitializeTimeout, Daemon: true,
		Description: "A new session that has sent no request (a legacy initialize, or a first 2026 request) this long after it connected is ended, so that idle connections cannot hold session places.",
		field:       func(l *Limits) any { return &l.InitializeTimeout }},
	{Key: "daemon.shutdown_grace", Flag: "shutdown-grace", Default: DefaultShutdownGrace,
		Description: "How long a drain (SIGTERM, SIGINT) lets in-flight requests finish.",
		field:       func(l *Limits) any { return &l.ShutdownGrace }},
	{Key: "daemon.upgrade_grace", Flag: "upgrade-grace", Default: DefaultUpgradeGrace, Daemon: true,
		Description: "How long an upgrade (snodod upgrade, SIGUSR2) lets each session's in-flight requests finish before the session is handed to the new process; the rest are answered \"snodod restarted; this request was cancelled\".",
		field:       func(l *Limits) any { return &l.UpgradeGrace }},
}

// All returns the description of every limit, in reference order. The
// slice is new on every call.
func All() []Limit { return append([]Limit(nil), all...) }

// Defaults returns every limit at its default.
func Defaults() Limits { return Limits{}.WithDefaults() }

// WithDefaults returns ls with every zero field set to its default.
func (ls Limits) WithDefaults() Limits {
	for _, l := range all {
		switch p := l.field(&ls).(type) {
		case *int:
			if *p == 0 {
				*p = l.Default.(int)
			}
		case *time.Duration:
			if *p == 0 {
				*p = l.Default.(time.Duration)
			}
		}
	}
	return ls
}

// Validate reports every negative field at once, joined with errors.Join,
// each in the words of docs/transport.md §15: "max_line_bytes must be a
// positive integer". Zero fields are valid (they mean the default).
func (ls Limits) Validate() error {
	var errs []error
	for _, l := range all {
		if negative(l.field(&ls)) {
			errs = append(errs, errors.New(l.Leaf()+" "+l.Allowed()))
		}
	}
	return errors.Join(errs...)
}

func negative(p any) bool {
	switch p := p.(type) {
	case *int:
		return *p < 0
	case *time.Duration:
		return *p < 0
	}
	return false
}
