package server

import "context"

// RequestContext is a request's context as a transport builds it: its
// parent, and the transport's sinks for the request (what WithNotifier,
// WithClientRequester and WithProgress add), in one value that the
// transport may keep inside its own per-request state, so that giving a
// handler its sinks allocates nothing. A nil sink is absent. Use it by
// pointer; it must not be copied once in use.
type RequestContext struct {
	context.Context
	Notifier  Notifier
	Requester ClientRequester
	Progress  ProgressReporter
}

// Value answers the sinks' keys, and the parent's otherwise.
func (r *RequestContext) Value(key any) any {
	switch key.(type) {
	case notifierKey:
		if r.Notifier != nil {
			return r.Notifier
		}
		return nil
	case clientRequesterKey:
		if r.Requester != nil {
			return r.Requester
		}
		return nil
	case progressKey:
		if r.Progress != nil {
			return r.Progress
		}
		return nil
	}
	return r.Context.Value(key)
}

// DispatchInline serves ping, server/discover and the four list methods
// at once (see Dispatcher): the runtime's own methods that never
// block, since they read the catalog and the request and wait on nothing
// else. Any other method reports false, and so does a request the
// StartHook is not Ready for (its start may wait).
func (s *Server) DispatchInline(ctx context.Context, req *Request) (Outcome, bool) {
	switch req.Method {
	case "ping", "server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		if h := s.startHook(); h != nil && !h.Ready(req) {
			return Outcome{}, false // Start may wait: the executor's
		}
		return s.Dispatch(ctx, req), true
	}
	return Outcome{}, false
}
