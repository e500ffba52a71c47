package http

import (
	"context"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/internal/cancelled"
)

// listen serves an open subscriptions/listen stream on rsp (docs/protocol.md
// §9, §13.3): the acknowledgement first, then each event, asked of the
// source only after the previous one was written (§9.4), until the source
// ends, the client goes away (nothing more is written), or Shutdown
// (notifications/cancelled, then the end). The listener holds at most
// MaxSubscriptions such streams.
func (h *Handler) listen(ctx context.Context, rsp *responder, id protocol.ID, s server.Stream) {
	if !h.acquireListen() {
		s.Close(server.Refused, "")
		rsp.json(200, protocol.AppendError(nil, id, protocol.ErrSubscriptionCap))
		return
	}
	defer h.listens.Add(-1)
	ack, err := protocol.AppendNotification(nil, "notifications/subscriptions/acknowledged", s.Ack())
	if err != nil {
		s.Close(server.Completed, "acknowledgement cannot be encoded")
		rsp.json(200, protocol.AppendError(nil, id, protocol.ErrSubscriptionFailed))
		return
	}
	if !rsp.event(ack) {
		s.Close(server.OutputFailed, "")
		return
	}
	type event struct {
		ev  server.Event
		err error
	}
	pumpCtx, stop := context.WithCancel(context.Background())
	events, next, pumped := make(chan event), make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			ev, err := s.Next(pumpCtx)
			if pumpCtx.Err() != nil {
				return
			}
			select {
			case events <- event{ev, err}:
			case <-pumpCtx.Done():
				return
			}
			if err != nil || ev.Done {
				return
			}
			select {
			case <-next:
			case <-pumpCtx.Done():
				return
			}
		}
	}()
	defer func() {
		stop()
		<-pumped
	}()
	keep := time.NewTimer(h.o.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case e := <-events:
			switch {
			case e.err != nil:
				h.o.Logger.Warn("subscription source failed", "id", id, "err", e.err)
				s.Close(server.Completed, e.err.Error())
				rsp.event(protocol.AppendError(nil, id, protocol.ErrSubscriptionFailed))
				return
			case e.ev.Done:
				s.Close(server.Completed, "")
				frame, err := protocol.AppendResult(nil, id, e.ev.Final)
				if err != nil {
					frame = protocol.AppendError(nil, id, protocol.ErrSubscriptionFailed)
				}
				rsp.event(frame)
				return
			}
			frame, err := protocol.AppendNotification(nil, e.ev.Method, e.ev.Params)
			if err != nil {
				s.Close(server.Completed, "event cannot be encoded")
				rsp.event(protocol.AppendError(nil, id, protocol.ErrSubscriptionFailed))
				return
			}
			if !rsp.event(frame) {
				s.Close(server.Disconnected, "")
				return
			}
			next <- struct{}{}
			keep.Reset(h.o.KeepAlive)
		case <-keep.C:
			if !rsp.comment() {
				s.Close(server.Disconnected, "")
				return
			}
			keep.Reset(h.o.KeepAlive)
		case <-ctx.Done():
			s.Close(server.Disconnected, "")
			return
		case <-h.streamsEnd:
			frame, _ := protocol.AppendNotification(nil, "notifications/cancelled",
				cancelled.Params{RequestID: id, Reason: cancelled.SubscriptionClosed})
			rsp.event(frame)
			s.Close(server.ClosedByServer, "")
			return
		}
	}
}

// acquireListen takes a listen slot, or reports false at the cap.
func (h *Handler) acquireListen() bool {
	for {
		n := h.listens.Load()
		if n >= int64(h.o.MaxSubscriptions) {
			return false
		}
		if h.listens.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// sessionStream serves a legacy session's GET stream: the session-level
// notifications (list changes, updates of subscribed resources,
// docs/protocol.md §4.1, §9.7, §9.8), each asked for only after the previous
// one was written, until the client goes away, the session ends or
// Shutdown.
func (h *Handler) sessionStream(ctx context.Context, rsp *responder, s *session) {
	h.streams.Add(1)
	defer h.streams.Add(-1)
	// A comment commits the stream at once: a proxy that holds headers
	// until a body byte arrives shows it to the client now.
	if !rsp.comment() {
		return
	}
	keep := time.NewTimer(h.o.KeepAlive)
	defer keep.Stop()
	for {
		ev, ok, wake := s.state.Poll()
		if ok {
			frame, err := protocol.AppendNotification(nil, ev.Method, ev.Params)
			if err == nil && !rsp.event(frame) {
				return
			}
			keep.Reset(h.o.KeepAlive)
			continue
		}
		if wake == nil {
			return // the session state was closed
		}
		select {
		case <-wake:
		case <-keep.C:
			if !rsp.comment() {
				return
			}
			keep.Reset(h.o.KeepAlive)
		case <-ctx.Done():
			return
		case <-s.ended:
			return
		case <-h.streamsEnd:
			return
		}
	}
}
