package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/snodod/snodod/protocol"
)

// ToolListing is what a ToolListFilter decides by: who asks, and every
// tool the listing would show.
type ToolListing struct {
	// Caller is the session's Caller, or nil.
	Caller *Caller
	// ClientName is the client's clientInfo.name: its legacy
	// initialize's, or this 2026 request's; "" when it sent none.
	ClientName string
	// Names are the tools the listing would show in this era, sorted.
	Names []string
}

// ToolListFilter chooses which of a listing's tools a tools/list shows
// (a view's tool budget, docs/views.md): keep reports the names to list;
// a nil keep lists them all. It is called once per tools/list, outside
// the catalog's lock, and must not block. It hides, never refuses: a
// tools/call of a name it leaves out is served as any other.
type ToolListFilter func(l ToolListing) (keep func(name string) bool)

// SetToolListFilter installs f (nil removes it).
func (s *Server) SetToolListFilter(f ToolListFilter) {
	s.mu.Lock()
	s.ext.toolList = f
	s.mu.Unlock()
}

// toolListFilter is the installed filter, nil for none.
func (s *Server) toolListFilter() ToolListFilter {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ext.toolList
}

// keepTools asks f which of names this call's listing shows.
func (c *call) keepTools(f ToolListFilter, names []string) func(string) bool {
	l := ToolListing{Caller: c.sess.Caller(), Names: names}
	info := c.sess.ClientInfo()
	if c.modern && c.meta != nil && c.meta.ClientInfo != nil {
		info = c.meta.ClientInfo
	}
	var ci struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(info, &ci) == nil {
		l.ClientName = ci.Name
	}
	return f(l)
}

// ToolRelayed reports whether name is a relayed tool (ReplaceRelayed's)
// and which owner relays it; false for a tool of AddTool's or none.
func (s *Server) ToolRelayed(name string) (owner string, relayed bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.tools[name]; e != nil && e.relay != nil {
		return e.relay.owner, true
	}
	return "", false
}

// OwnTools returns the definitions of the tools registered with AddTool
// (not the relayed ones), by name, as tools/list shows them in 2025-11-25
// and later.
func (s *Server) OwnTools() map[string]json.RawMessage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]json.RawMessage{}
	for name, e := range s.tools {
		if e.relay != nil {
			continue
		}
		if raw, err := protocol.AppendValue(nil, e.tool); err == nil {
			out[name] = raw
		}
	}
	return out
}

// errNotInHandler is CallTool's error outside a handler's context.
var errNotInHandler = errors.New("server: CallTool needs the context of a request's handler")

// CallTool serves, from inside a handler (ctx is the handler's), a
// tools/call of this server with params (a tools/call's params: name,
// arguments, _meta), as if the client of the handler's request had sent
// it: its session, era and version, its progress token when params
// carry the request's _meta, its cancellation and deadline. The result is
// the call's, shaped for the era; an error response is the returned
// *protocol.Error. A 2026 input_required answer is returned as it is,
// its requestState bound to params: a caller that relays it must send
// the retry to CallTool with the same params.
func (s *Server) CallTool(ctx context.Context, params json.RawMessage) (*RawResult, error) {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil {
		return nil, errNotInHandler
	}
	req := &Request{ID: c.req.ID, Method: "tools/call", Params: params, Header: c.req.Header, State: c.sess}
	o := s.Dispatch(ctx, req)
	switch {
	case o.Err != nil:
		return nil, o.Err
	case o.Stream != nil:
		o.Stream.Close(Disconnected, "")
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "Internal error"}
	}
	raw, err := protocol.AppendValue(nil, o.Result)
	if err != nil {
		return nil, err
	}
	return &RawResult{Result: raw}, nil
}
