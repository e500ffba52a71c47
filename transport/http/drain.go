package http

import (
	"context"
	"time"
)

// The handler's end: Shutdown for a drain, Retire for the old process of
// an upgrade (docs/protocol.md §13.7).

// Shutdown ends the handler (docs/transport.md §12.4 as HTTP has it): listen
// and session streams end at once (a listen with notifications/cancelled),
// new requests are refused with "Session closed by server", admitted ones
// may finish within Options.ShutdownGrace and are then cancelled and
// answered so, and every legacy session ends. It returns when every
// response has ended, or when ctx ends. It may be called more than once.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.closeOnce.Do(func() {
		close(h.closing)
		h.retireOnce.Do(h.endStreams) // under retireOnce: Retire's close of streamsEnd cannot run at once
		h.startGrace()
	})
	h.activeMu.Lock()
	if h.idle == nil {
		h.idle = make(chan struct{})
		if h.active == 0 {
			close(h.idle)
		}
	}
	done := h.idle
	h.activeMu.Unlock()
	select {
	case <-done:
		h.sessions.closeAll()
		return nil
	case <-ctx.Done():
		h.sessions.closeAll()
		return ctx.Err()
	}
}

// Retire prepares the handler for another process that serves its
// listener from now on (an upgrade, docs/protocol.md §13.7): requests are
// still served, each answer carries Connection: close so that a kept-alive
// connection is closed right after its next answer (never while its client
// may be sending), listen and session streams end at once as in Shutdown
// (their clients reconnect, to the other process), and what runs may
// finish within ShutdownGrace. The caller stops accepting, waits for
// Stats().Connections to reach 0 (bounded by the grace), then calls
// Shutdown for what is left. It may be called more than once.
func (h *Handler) Retire() {
	h.retireOnce.Do(func() {
		h.retired.Store(true)
		h.endStreams()
		h.startGrace()
	})
}

func (h *Handler) endStreams() {
	select {
	case <-h.streamsEnd:
	default:
		close(h.streamsEnd)
	}
}

func (h *Handler) startGrace() {
	h.graceOnce.Do(func() { time.AfterFunc(h.o.ShutdownGrace, func() { close(h.graceEnd) }) })
}
