package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// The daemon's own log, kept for `snodod logs` (no name): a daemon that a
// client started in the background (snodod connect) has its standard
// error in a file the user may never find, and one under systemd in the
// journal; either way, its last lines are one command away. The daemon's
// logger writes every record to Options.Logger and, as a text line, to a
// ring of the newest lines, bounded in bytes.

// DefaultLogRingBytes is the size of the ring of the daemon's own log
// lines (Options.LogRingBytes): about two thousand lines.
const DefaultLogRingBytes = 256 << 10

// logFollowBuffer is how many lines a follower's channel holds before a
// slow reader starts losing them.
const logFollowBuffer = 256

// logRing keeps the newest whole lines within max bytes, and passes every
// line to its followers. Its methods may be called from any goroutine.
type logRing struct {
	max int

	mu        sync.Mutex
	lines     [][]byte // oldest first, from head
	head      int
	bytes     int // held by lines[head:]
	followers map[chan []byte]struct{}
}

func newLogRing(maxBytes int) *logRing {
	if maxBytes <= 0 {
		maxBytes = DefaultLogRingBytes
	}
	return &logRing{max: maxBytes, followers: map[chan []byte]struct{}{}}
}

// Write keeps p, one log line (a text handler writes each record in one
// call), dropping the oldest lines it displaces; a line longer than the
// ring keeps its first max bytes. It never blocks and never fails.
func (r *logRing) Write(p []byte) (int, error) {
	line := append([]byte(nil), p[:min(len(p), r.max)]...)
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.followers {
		select {
		case ch <- line:
		default: // a slow follower loses this line
		}
	}
	r.lines = append(r.lines, line)
	r.bytes += len(line)
	for r.bytes > r.max {
		r.bytes -= len(r.lines[r.head])
		r.lines[r.head] = nil
		r.head++
	}
	if r.head > len(r.lines)/2 { // compact: the slice never grows without bound
		r.lines = append(r.lines[:0], r.lines[r.head:]...)
		r.head = 0
	}
	return len(p), nil
}

// snapshot returns the lines held, oldest first, and with follow the
// lines written from now on, until cancel (which may be called more than
// once).
func (r *logRing) snapshot(follow bool) (held []byte, lines <-chan []byte, cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held = make([]byte, 0, r.bytes)
	for _, l := range r.lines[r.head:] {
		held = append(held, l...)
	}
	if !follow {
		return held, nil, nil
	}
	ch := make(chan []byte, logFollowBuffer)
	r.followers[ch] = struct{}{}
	var once sync.Once
	return held, ch, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.followers, ch)
			r.mu.Unlock()
			close(ch)
		})
	}
}

// tee returns a handler that passes each record to base, and writes those
// base takes as a text line to the ring.
func (r *logRing) tee(base slog.Handler) slog.Handler {
	// The level is base's business: the ring's own handler takes all.
	text := slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.Level(-1 << 20)})
	return teeHandler{base: base, ring: text}
}

type teeHandler struct{ base, ring slog.Handler }

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }

func (h teeHandler) Handle(ctx context.Context, rec slog.Record) error {
	return errors.Join(h.base.Handle(ctx, rec), h.ring.Handle(ctx, rec))
}

func (h teeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return teeHandler{base: h.base.WithAttrs(attrs), ring: h.ring.WithAttrs(attrs)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{base: h.base.WithGroup(name), ring: h.ring.WithGroup(name)}
}

// Logger is the logger the daemon writes its log to: Options.Logger's
// handler, with every record it takes also kept for `snodod logs`. A
// program that runs the daemon makes it its default logger
// (slog.SetDefault), so that what other packages log there is kept too.
func (d *Daemon) Logger() *slog.Logger { return d.log }
