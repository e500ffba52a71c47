package server

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"

	"github.com/snodod/snodod/protocol"
)

// This file holds relayed items: tools, prompts, resources and templates
// that another MCP server serves (a hosted upstream, docs/upstreams.md §2),
// listed with their definitions as that server sent them and served by a
// handler that forwards the request. They live in the same catalog as the
// items registered with AddTool and its siblings, so pagination, cursors,
// list-change notifications, listen streams and era shaping are the
// runtime's as for any item; what differs is that the runtime neither
// decodes their definitions nor validates their arguments (the server that
// defines them does), and that their results are the other server's,
// shaped for the client's era (relay_call.go).

// RawTool is a relayed tool. Definition is the tool object as the other
// server listed it; Name replaces its "name" member in listings, so a
// tool may be listed under a prefixed name.
type RawTool struct {
	Name       string
	Definition json.RawMessage
	Handler    RawHandler
}

// RawPrompt is a relayed prompt; Complete, when set, serves
// completion/complete for its arguments.
type RawPrompt struct {
	Name       string
	Definition json.RawMessage
	Handler    RawHandler
	Complete   RawHandler
}

// RawResource is a relayed resource, listed and matched by its URI, which
// is never rewritten.
type RawResource struct {
	URI        string
	Definition json.RawMessage
	Handler    RawHandler
}

// RawTemplate is a relayed resource template. URITemplate may use any
// RFC 6570 expression ({x}, {+x}, {/x}, {?x,y}, {#x}); a read is routed to
// it when the URI matches the template loosely (every expression matching
// what it could expand to).
type RawTemplate struct {
	URITemplate string
	Definition  json.RawMessage
	Handler     RawHandler
	Complete    RawHandler
}

// RelayedItems is one owner's set of relayed items, replaced as a whole by
// ReplaceRelayed.
type RelayedItems struct {
	Tools     []RawTool
	Prompts   []RawPrompt
	Resources []RawResource
	Templates []RawTemplate
}

// RawRequest is a relayed request as its handler sees it.
type RawRequest struct {
	// Caller is who asks: the Caller of the request's session, or nil.
	Caller *Caller
	// Method is the request's method: tools/call, prompts/get,
	// resources/read or completion/complete.
	Method string
	// Name is the item's name as listed (tools/call, prompts/get), or the
	// URI read (resources/read); "" for completion/complete.
	Name string
	// Params is the params object exactly as the client sent it (the
	// listed name included), or nil. A 2026 retry's inputResponses and
	// requestState are in it too; InputResponses and State are their
	// decoded forms.
	Params json.RawMessage
	// Version is the protocol version the request is served under; Modern
	// is true for 2026-07-28.
	Version string
	Modern  bool
	// ClientCapabilities are the client's: from the request's _meta in
	// 2026, from initialize in legacy eras. ClientInfo is the 2026
	// request's io.modelcontextprotocol/clientInfo, or nil; LogLevel its
	// io.modelcontextprotocol/logLevel, or "".
	ClientCapabilities json.RawMessage
	ClientInfo         json.RawMessage
	LogLevel           string
	// ProgressToken is the request's progressToken as sent, or nil.
	ProgressToken json.RawMessage
	// InputResponses are a 2026 retry's inputResponses (this round's only:
	// relayed answers are never merged with earlier rounds'), nil on a
	// first round.
	InputResponses map[string]json.RawMessage
	// State is the handler's own state of the previous round (RawResult
	// State), recovered from the signed requestState; nil on a first
	// round.
	State []byte
}

// RawResult is what a relay handler answers.
type RawResult struct {
	// Result is the other server's result object. The runtime shapes it
	// for the client's era (docs/protocol.md §5.3): for 2026 clients resultType
	// is added when absent and the serverInfo _meta member is the
	// runtime's; for legacy clients resultType, ttlMs, cacheScope and
	// that member are removed.
	Result json.RawMessage
	// InputRequests, when set (2026 clients only), makes the answer
	// input_required with these inputRequests verbatim and a requestState
	// the runtime signs, binding State to the method and the params, so
	// the retry hands State back in RawRequest.State.
	InputRequests json.RawMessage
	State         []byte
}

// RawHandler serves a relayed request. A *protocol.Error (returned as the
// error, or wrapped) is answered as it is; any other error is logged and
// answered -32603 "Internal error". ctx carries what handlers' contexts
// carry (progress with ReportProgress, Log, RequestClient); it ends when
// the request is cancelled, times out (see ExtendDeadline) or its
// connection ends.
type RawHandler func(ctx context.Context, req *RawRequest) (*RawResult, error)

// relayItem is the relayed part of a catalog entry.
type relayItem struct {
	key      string // the listed name, URI or URI template
	owner    string
	handler  RawHandler
	complete RawHandler
	// listed is the definition with the listed name; listedNoIcons the
	// same without "icons", for 2025-06-18 (docs/protocol.md §3.5).
	listed, listedNoIcons json.RawMessage
}

// listedItem is one entry of a list page: a registered item, encoded as
// the runtime encodes it, or a relayed definition, written as it is.
type listedItem struct {
	key string
	v   any
	raw json.RawMessage
}

func (l listedItem) MarshalJSON() ([]byte, error) {
	if l.raw != nil {
		return l.raw, nil
	}
	// protocol.AppendValue, not json.Marshal: frames leave <, > and & as
	// they are (docs/transport.md §11.1).
	return protocol.AppendValue(nil, l.v)
}

func listedKey(l listedItem) string { return l.key }

func (r *relayItem) item(dropIcons bool) listedItem {
	if dropIcons {
		return listedItem{key: r.key, raw: r.listedNoIcons}
	}
	return listedItem{key: r.key, raw: r.listed}
}

// newRelayItem prepares a definition for listing under key (written as
// member, "name" or "uri" or "uriTemplate"). ok is false when the
// definition is not a JSON object.
func newRelayItem(owner, member, key string, def json.RawMessage, h, complete RawHandler) (*relayItem, bool) {
	m, ok := protocol.Members(def)
	if !ok || m == nil || h == nil {
		return nil, false
	}
	name, _ := protocol.AppendValue(nil, key)
	m[member] = name
	// protocol.AppendValue, not json.Marshal, which would escape the <, >
	// and & of the other server's text: frames leave them as they are
	// (docs/transport.md §11.1).
	listed, err := protocol.AppendValue(nil, m)
	if err != nil {
		return nil, false
	}
	delete(m, "icons")
	noIcons, err := protocol.AppendValue(nil, m)
	if err != nil {
		return nil, false
	}
	return &relayItem{key: key, owner: owner, handler: h, complete: complete, listed: listed, listedNoIcons: noIcons}, true
}

// ReplaceRelayed replaces every relayed item of each owner in sets with
// that owner's new items, in one change: one catalog revision, and one
// list-change notification per kind whose listing changed (tools,
// prompts, resources with templates). Owners are applied in name order,
// after all of their old items are gone, so names move between them
// atomically. An item whose name (URI, template) is taken by someone else
// (an item registered with AddTool and its siblings, a relayed item of an
// owner not in sets, or an earlier item) is left out and reported in
// refused under its owner, as "tool NAME", "prompt NAME", "resource URI"
// or "template URITEMPLATE"; so is an item whose definition is not a JSON
// object. An owner given an empty set loses all of its items.
func (s *Server) ReplaceRelayed(sets map[string]RelayedItems) (refused map[string][]string) {
	owners := slices.Sorted(maps.Keys(sets))
	refused = map[string][]string{}
	s.mu.Lock()
	var kinds []ChangeKind
	if replaceKind(s.tools, sets, owners, "tool ", refused,
		func(items RelayedItems) []RawTool { return items.Tools },
		func(owner string, t RawTool) (string, *relayItem, bool) {
			r, ok := newRelayItem(owner, "name", t.Name, t.Definition, t.Handler, nil)
			return t.Name, r, ok
		},
		func(e *toolEntry) *relayItem { return e.relay },
		func(r *relayItem) *toolEntry { return &toolEntry{relay: r} }) {
		kinds = append(kinds, changeTools)
	}
	if replaceKind(s.prompts, sets, owners, "prompt ", refused,
		func(items RelayedItems) []RawPrompt { return items.Prompts },
		func(owner string, p RawPrompt) (string, *relayItem, bool) {
			r, ok := newRelayItem(owner, "name", p.Name, p.Definition, p.Handler, p.Complete)
			return p.Name, r, ok
		},
		func(e *promptEntry) *relayItem { return e.relay },
		func(r *relayItem) *promptEntry { return &promptEntry{relay: r} }) {
		kinds = append(kinds, changePrompts)
	}
	resChanged := replaceKind(s.resources, sets, owners, "resource ", refused,
		func(items RelayedItems) []RawResource { return items.Resources },
		func(owner string, r RawResource) (string, *relayItem, bool) {
			ri, ok := newRelayItem(owner, "uri", r.URI, r.Definition, r.Handler, nil)
			return r.URI, ri, ok && r.URI != ""
		},
		func(e *resourceEntry) *relayItem { return e.relay },
		func(r *relayItem) *resourceEntry { return &resourceEntry{relay: r} })
	tplChanged := replaceKind(s.templates, sets, owners, "template ", refused,
		func(items RelayedItems) []RawTemplate { return items.Templates },
		func(owner string, t RawTemplate) (string, *relayItem, bool) {
			ri, ok := newRelayItem(owner, "uriTemplate", t.URITemplate, t.Definition, t.Handler, t.Complete)
			return t.URITemplate, ri, ok && t.URITemplate != ""
		},
		func(e *templateEntry) *relayItem { return e.relay },
		func(r *relayItem) *templateEntry { return &templateEntry{relay: r, match: looseTemplate(r.listed)} })
	if resChanged || tplChanged {
		kinds = append(kinds, changeResources)
	}
	if len(kinds) > 0 {
		s.revision++
		s.updateCapabilitiesLocked()
	}
	s.mu.Unlock()
	for _, k := range kinds {
		s.hub.publish(change{kind: k})
	}
	return refused
}

// replaceKind swaps the owners' relayed entries of one kind for their new
// items and reports whether the listing changed.
func replaceKind[E any, I any](entries map[string]E, sets map[string]RelayedItems, owners []string, label string, refused map[string][]string,
	itemsOf func(RelayedItems) []I, prepare func(string, I) (string, *relayItem, bool), relayOf func(E) *relayItem, wrap func(*relayItem) E) bool {
	old := map[string]json.RawMessage{}
	for k, e := range entries {
		if r := relayOf(e); r != nil {
			if _, replaced := sets[r.owner]; replaced {
				old[k] = r.listed
				delete(entries, k)
			}
		}
	}
	next := map[string]json.RawMessage{}
	for _, owner := range owners {
		for _, it := range itemsOf(sets[owner]) {
			key, r, ok := prepare(owner, it)
			if _, taken := entries[key]; !ok || taken {
				refused[owner] = append(refused[owner], label+key)
				continue
			}
			entries[key] = wrap(r)
			next[key] = r.listed
		}
	}
	return !maps.EqualFunc(old, next, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })
}

// looseTemplate compiles a relayed template's uriTemplate into a matcher
// that accepts what each RFC 6570 expression could expand to: {x} one
// path segment, {+x} and {#x} anything, {/x} path segments, {.x} and
// {;x} their prefixed lists, {?x} and {&x} a query. It never fails: a
// template that cannot be read matches nothing.
func looseTemplate(def json.RawMessage) *uriTemplate {
	m, _ := protocol.Members(def)
	t, _ := protocol.String(m["uriTemplate"])
	re, err := templateRegexp(t, func(expr string) (string, error) {
		switch {
		case expr == "":
			return "", nil
		case expr[0] == '+' || expr[0] == '#':
			return `.*`, nil
		case expr[0] == '/':
			return `(?:/[^/?#]*)*`, nil
		case expr[0] == '.' || expr[0] == ';':
			return `(?:` + regexp.QuoteMeta(expr[:1]) + `[^/?#]*)*`, nil
		case expr[0] == '?' || expr[0] == '&':
			return `(?:[?&][^#]*)?`, nil
		}
		return `[^/?#]*`, nil
	})
	if err != nil {
		return &uriTemplate{re: regexp.MustCompile(`^\b$`)} // matches nothing
	}
	return &uriTemplate{re: re}
}
