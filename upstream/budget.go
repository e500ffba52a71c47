package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/toolsearch"
)

// The tool budget of the aggregated view (docs/views.md, "Budgets"). Over
// its budget a session's tools/list shows what fits: two tools of
// snodod's, search_tools and call_tool, which reach every tool of the
// view, the tools of upstreams.always, then snodod's own tools, then the
// most used relayed tools (by the view's call counts, usage.go). What is
// not listed stays callable by its own name: the budget hides, it never
// refuses.

// budgetOwner owns the aggregated view's search_tools and call_tool; no
// upstream can have the name (config's entry names have no colon).
const budgetOwner = "snodod:budget"

// The names search_tools and call_tool take, in order: a tool of snodod's
// own catalog that holds the first keeps it, and the budget's tool takes
// the second (relayed names always hold "__", so only the daemon's own
// catalog can hold either). With both held, the tool is not offered.
var (
	searchToolNames = []string{"search_tools", "snodod_search_tools"}
	callToolNames   = []string{"call_tool", "snodod_call_tool"}
)

// searchLimit bounds search_tools' limit argument; defaultSearchLimit is
// its default.
const (
	searchLimit        = 20
	defaultSearchLimit = 5
)

// viewTools is one aggregated server's tools as the budget sees them,
// rebuilt at every refresh of the views: its own tools (Handler nil,
// called through the server) and the relayed ones.
type viewTools struct {
	tools  []server.RawTool  // in the index's order: own tools, then relayed
	byName map[string]int    // tools' index by listed name
	ranked []string          // own tools by name, then relayed ones most used first, then by name
	index  *toolsearch.Index // over tools
}

// metaNames are the names one aggregated server gives search_tools and
// call_tool ("" for one not offered).
type metaNames struct{ search, call string }

func (n metaNames) has(name string) bool { return name != "" && (name == n.search || name == n.call) }

// countUsage makes every relayed tool of sets count its calls in the
// view whose usage key is view (aggregatedView, or a named view's).
func (m *Manager) countUsage(view string, sets map[string]server.RelayedItems) {
	for _, items := range sets {
		for i := range items.Tools {
			name, h := items.Tools[i].Name, items.Tools[i].Handler
			items.Tools[i].Handler = func(ctx context.Context, req *server.RawRequest) (*server.RawResult, error) {
				m.usage.add(view, name)
				return h(ctx, req)
			}
		}
	}
}

// namedUsage is a named view's key in the usage file: its tools count
// their calls there, by the names it shows, besides the aggregated
// view's count under theirs.
func namedUsage(v *config.View) string { return "@" + v.Name }

// buildViewTools indexes srv's own tools (but those named in meta) and
// the relayed ones of sets, and ranks them by the calls counted under
// view (countUsage).
func (m *Manager) buildViewTools(srv *server.Server, view string, sets map[string]server.RelayedItems, meta metaNames) *viewTools {
	vt := &viewTools{byName: map[string]int{}}
	own := srv.OwnTools()
	for _, name := range slices.Sorted(maps.Keys(own)) {
		vt.tools = append(vt.tools, server.RawTool{Name: name, Definition: own[name]})
	}
	nOwn := len(vt.tools)
	for _, owner := range slices.Sorted(maps.Keys(sets)) {
		for _, t := range sets[owner].Tools {
			if _, taken := own[t.Name]; !taken && !meta.has(t.Name) {
				vt.tools = append(vt.tools, t)
			}
		}
	}
	docs := make([]toolsearch.Tool, len(vt.tools))
	for i, t := range vt.tools {
		vt.byName[t.Name] = i
		docs[i] = toolsearch.Tool{Name: t.Name, Definition: t.Definition}
		vt.ranked = append(vt.ranked, t.Name)
	}
	counts := m.usage.of(view)
	slices.SortFunc(vt.ranked[nOwn:], func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	vt.index = toolsearch.New(docs)
	return vt
}

// chooseMetaNames picks srv's names for search_tools and call_tool: the
// first of each list its own catalog does not hold.
func (m *Manager) chooseMetaNames(srv *server.Server) metaNames {
	held := map[string]bool{}
	for _, n := range srv.ToolNames() {
		if owner, relayed := srv.ToolRelayed(n); !relayed || owner != budgetOwner {
			held[n] = true
		}
	}
	pick := func(names []string, what string) string {
		for _, n := range names {
			if !held[n] {
				if n != names[0] {
					m.log.Warn("tool budget: snodod's own catalog holds "+names[0]+"; the budget's tool is listed as "+n, "tool", what)
				}
				return n
			}
		}
		m.log.Warn("tool budget: snodod's own catalog holds every name of the budget's "+what+"; it is not offered", "names", names)
		return ""
	}
	names := metaNames{search: pick(searchToolNames, "search_tools"), call: pick(callToolNames, "call_tool")}
	m.mu.Lock()
	if _, attached := m.aggregates[srv]; attached || m.named[srv] != nil {
		m.metas[srv] = names
	}
	m.mu.Unlock()
	return names
}

// metaItems are srv's search_tools and call_tool as relayed items.
func (m *Manager) metaItems(srv *server.Server, names metaNames) server.RelayedItems {
	var items server.RelayedItems
	if names.search != "" {
		items.Tools = append(items.Tools, server.RawTool{Name: names.search, Definition: json.RawMessage(searchToolsDefinition),
			Handler: func(ctx context.Context, req *server.RawRequest) (*server.RawResult, error) {
				return m.searchTools(srv, req)
			}})
	}
	if names.call != "" {
		items.Tools = append(items.Tools, server.RawTool{Name: names.call, Definition: json.RawMessage(callToolDefinition),
			Handler: func(ctx context.Context, req *server.RawRequest) (*server.RawResult, error) {
				return m.callTool(ctx, srv, req)
			}})
	}
	return items
}

// viewToolsOf is srv's current viewTools, nil before its first refresh.
func (m *Manager) viewToolsOf(srv *server.Server) (*viewTools, metaNames) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.viewTools[srv], m.metas[srv]
}

// budgetSpec is what a view's budget is made of: its max_tools (0: the
// client's known limit) and its always patterns.
type budgetSpec struct {
	maxTools int
	always   []string
}

// budgetSpecOf is srv's budget: for the aggregated view upstreams.max_tools
// and upstreams.always, which a [views.NAME]'s own override.
func (m *Manager) budgetSpecOf(srv *server.Server) budgetSpec {
	m.mu.Lock()
	defer m.mu.Unlock()
	spec := budgetSpec{maxTools: m.cfg.Upstreams.MaxTools, always: m.cfg.Upstreams.Always}
	if v := m.named[srv]; v != nil {
		if v.MaxTools > 0 {
			spec.maxTools = v.MaxTools
		}
		if v.Always != nil {
			spec.always = v.Always
		}
	}
	return spec
}

// limit is the budget of a session of the client named client: max_tools,
// else the client's known limit; 0 for none.
func (b budgetSpec) limit(client string) int {
	if b.maxTools > 0 {
		return b.maxTools
	}
	return clientLimit(client)
}

// pinned reports whether patterns (upstreams.always) pin name: listed
// over the budget.
func pinned(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// toolListFilter is srv's server.ToolListFilter: under its budget a
// session sees every tool but search_tools and call_tool; over it, what
// fits and those two.
func (m *Manager) toolListFilter(srv *server.Server) server.ToolListFilter {
	return func(l server.ToolListing) func(string) bool {
		vt, meta := m.viewToolsOf(srv)
		spec := m.budgetSpecOf(srv)
		limit := spec.limit(l.ClientName)
		listed, metas := 0, 0
		for _, n := range l.Names {
			if meta.has(n) {
				metas++
			} else {
				listed++
			}
		}
		if limit == 0 || vt == nil || listed <= limit || metas == 0 {
			return func(n string) bool { return !meta.has(n) }
		}
		keep := make(map[string]bool, limit)
		names := make(map[string]bool, len(l.Names))
		var unknown []string // tools the last refresh did not see (added since): listed last
		for _, n := range l.Names {
			names[n] = true
			_, known := vt.byName[n]
			switch {
			case meta.has(n) || pinned(spec.always, n):
				keep[n] = true
			case !known:
				unknown = append(unknown, n)
			}
		}
		for _, n := range slices.Concat(vt.ranked, unknown) {
			if len(keep) >= limit {
				break
			}
			if names[n] {
				keep[n] = true
			}
		}
		return func(n string) bool { return keep[n] }
	}
}

const searchToolsDefinition = `{"name":"search_tools","title":"Search tools",` +
	`"description":"Find the tools of this server that do what you describe, among those the tool list leaves out to fit the client's limit: a query in plain words, answered with the best matching tools' full definitions (name, description, input schema). Call one by its name, or through call_tool.",` +
	`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What the tool should do, in plain words (read a text file, create a directory)."},` +
	`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"How many tools to return, best first (default 5)."}},"required":["query"]},` +
	`"annotations":{"readOnlyHint":true,"openWorldHint":false}}`

const callToolDefinition = `{"name":"call_tool","title":"Call a tool",` +
	`"description":"Call any tool of this server by its name, listed or found with search_tools, with its arguments: the answer is that tool's own result.",` +
	`"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, as search_tools gives it."},` +
	`"arguments":{"type":"object","description":"The tool's arguments, as its input schema describes them."}},"required":["name"]}}`

// toolError is an isError tools/call result saying msg.
func toolError(msg string) *server.RawResult {
	raw, _ := protocol.AppendValue(nil, map[string]any{"isError": true, "content": []map[string]string{{"type": "text", "text": msg}}})
	return &server.RawResult{Result: raw}
}

// searchTools serves search_tools: the best matches of the query among
// srv's tools, with their definitions as the view lists them.
func (m *Manager) searchTools(srv *server.Server, req *server.RawRequest) (*server.RawResult, error) {
	var p struct {
		Arguments struct {
			Query string `json:"query"`
			Limit *int   `json:"limit"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Arguments.Query == "" {
		return toolError("search_tools needs a query: a string saying what the tool should do"), nil
	}
	limit := defaultSearchLimit
	if p.Arguments.Limit != nil {
		limit = min(max(*p.Arguments.Limit, 1), searchLimit)
	}
	vt, _ := m.viewToolsOf(srv)
	var hits []toolsearch.Hit
	if vt != nil {
		hits = vt.index.Search(p.Arguments.Query, limit)
	}
	defs := make([]json.RawMessage, 0, len(hits))
	for _, h := range hits {
		t := vt.tools[h.Index]
		def, ok := protocol.Members(t.Definition)
		if !ok || def == nil {
			continue
		}
		def["name"] = protocol.AppendString(nil, t.Name)
		if req.Version == protocol.Version20250618 {
			delete(def, "icons") // as its listings leave them out (docs/protocol.md §3.5)
		}
		raw, err := protocol.AppendValue(nil, def)
		if err != nil {
			return nil, err
		}
		defs = append(defs, raw)
	}
	found := map[string]any{"tools": defs}
	text, err := protocol.AppendValue(nil, found)
	if err != nil {
		return nil, err
	}
	if len(hits) == 0 {
		text = fmt.Appendf(nil, "No tool matches %q; try other words.", p.Arguments.Query)
	}
	raw, err := protocol.AppendValue(nil, map[string]any{"content": []map[string]string{{"type": "text", "text": string(text)}}, "structuredContent": found})
	if err != nil {
		return nil, err
	}
	return &server.RawResult{Result: raw}, nil
}

// callTool serves call_tool: the named tool's own call, with the
// request's progress token, cancellation, deadline and (2026) input
// rounds, as if the client had called it by its name: a relayed tool
// through its handler, one of snodod's own through srv.
func (m *Manager) callTool(ctx context.Context, srv *server.Server, req *server.RawRequest) (*server.RawResult, error) {
	members, _ := protocol.Members(req.Params)
	args, _ := protocol.Members(members["arguments"])
	name, ok := protocol.String(args["name"])
	if !ok || name == "" {
		return toolError("call_tool needs name: the name of the tool to call, as search_tools gives it"), nil
	}
	inner := args["arguments"]
	if inner == nil || string(inner) == "null" {
		inner = json.RawMessage("{}")
	} else if protocol.JSONKind(inner) != '{' {
		return toolError("call_tool's arguments must be an object: the arguments of " + name), nil
	}
	vt, _ := m.viewToolsOf(srv)
	i, found := 0, false
	if vt != nil {
		i, found = vt.byName[name]
	}
	if !found {
		return toolError(fmt.Sprintf("No tool %q in this view for call_tool: search_tools finds the view's tools (search_tools and call_tool themselves are called by their names).", name)), nil
	}
	params := protocol.SetMember(protocol.SetMember(req.Params, "name", protocol.AppendString(nil, name)), "arguments", inner)
	t := vt.tools[i]
	if t.Handler == nil {
		return srv.CallTool(ctx, params)
	}
	sub := *req
	sub.Name, sub.Params = name, params
	return t.Handler(ctx, &sub)
}

// ViewTools counts the tools srv, a view's server, holds: every tool of
// its catalog but the budget's search_tools and call_tool, which reach
// those (status and snodod views count what a view holds, not what its
// budget lists).
func ViewTools(srv *server.Server) int {
	n := 0
	for _, name := range srv.ToolNames() {
		if owner, relayed := srv.ToolRelayed(name); !relayed || owner != budgetOwner {
			n++
		}
	}
	return n
}
