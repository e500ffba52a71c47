package server

import "context"

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
