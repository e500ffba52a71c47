package executor

import (
	"context"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/internal/ctxkey"
)

// RequestContext is a request's context as a transport builds it: its
// parent, and the transport's sinks for the request (what server.WithNotifier,
// server.WithClientRequester and server.WithProgress add), in one value that the
// transport may keep inside its own per-request state, so that giving a
// handler its sinks allocates nothing. A nil sink is absent. Use it by
// pointer; it must not be copied once in use.
type RequestContext struct {
	context.Context
	Notifier  server.Notifier
	Requester server.ClientRequester
	Progress  server.ProgressReporter
}

// Value answers the sinks' keys, and the parent's otherwise.
func (r *RequestContext) Value(key any) any {
	switch key.(type) {
	case ctxkey.Notifier:
		if r.Notifier != nil {
			return r.Notifier
		}
		return nil
	case ctxkey.Requester:
		if r.Requester != nil {
			return r.Requester
		}
		return nil
	case ctxkey.Progress:
		if r.Progress != nil {
			return r.Progress
		}
		return nil
	}
	return r.Context.Value(key)
}
