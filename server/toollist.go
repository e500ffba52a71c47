package server

import (
	"encoding/json"
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
