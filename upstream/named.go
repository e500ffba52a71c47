package upstream

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Named views (docs/views.md): a [views.NAME] entry is a filter over the
// aggregated view's items, served by a server of its own so that what it
// lists, what it answers and the list_changed it announces are its own.
// It holds the hosted servers it names (every one without servers), the
// items its globs keep by the names the aggregated view shows, under the
// names Rename gives and with the definitions Override changes. Its items
// are relayed with the same handlers as the aggregated view's, so they
// reach the same shared instances: a view starts no process of its own.
// Anything it does not list is refused by its server, naming the view
// (server.SetViewName), and is never routed.

// AttachNamed makes srv show the view v (one of catalog.ViewServer's, so
// that it signs with server.state_key_file). srv is kept current until
// detach, which its owner calls once no session uses srv any more.
func (m *Manager) AttachNamed(srv *server.Server, v *config.View) (detach func()) {
	srv.SetViewName(v.Name)
	srv.SetSubscriptionHook(&viewHook{m: m, srv: srv})
	srv.SetStartHook(startHook{m: m, held: v.Holds})
	srv.SetToolListFilter(m.toolListFilter(srv))
	if o := m.opts.Observer; o != nil {
		srv.SetObserver(o)
	}
	m.mu.Lock()
	m.named[srv] = v
	m.mu.Unlock()
	m.refreshViews()
	return func() {
		m.mu.Lock()
		delete(m.named, srv)
		delete(m.metas, srv)
		delete(m.viewTools, srv)
		m.mu.Unlock()
	}
}

// namedItems filters the aggregated view's sets (by upstream) for v. Every
// owner of sets gets a set, empty for a server v does not hold, so that a
// server leaving the view takes its items with it.
func namedItems(v *config.View, sets map[string]server.RelayedItems) map[string]server.RelayedItems {
	out := make(map[string]server.RelayedItems, len(sets))
	for _, owner := range slices.Sorted(maps.Keys(sets)) {
		var items server.RelayedItems
		if !v.Holds(owner) {
			out[owner] = items
			continue
		}
		in := sets[owner]
		for _, t := range in.Tools {
			if v.Tools.Allows(t.Name) {
				t.Name = renamed(v, t.Name)
				t.Definition = overridden(v, t.Name, t.Definition, true)
				items.Tools = append(items.Tools, t)
			}
		}
		for _, p := range in.Prompts {
			if v.Prompts.Allows(p.Name) {
				p.Name = renamed(v, p.Name)
				p.Definition = overridden(v, p.Name, p.Definition, false)
				items.Prompts = append(items.Prompts, p)
			}
		}
		for _, r := range in.Resources {
			if v.Resources.Allows(r.URI) {
				items.Resources = append(items.Resources, r)
			}
		}
		for _, t := range in.Templates {
			if v.Resources.Allows(t.URITemplate) {
				items.Templates = append(items.Templates, t)
			}
		}
		out[owner] = items
	}
	return out
}

func renamed(v *config.View, name string) string {
	if n, ok := v.Rename[name]; ok {
		return n
	}
	return name
}

// overridden is def with v's override of the item shown as name: title
// and description replaced, annotations merged member by member (tools).
func overridden(v *config.View, name string, def json.RawMessage, tool bool) json.RawMessage {
	o, ok := v.Override[name]
	if !ok {
		return def
	}
	m, ok := protocol.Members(def)
	if !ok || m == nil {
		return def
	}
	set := func(key string, val any) {
		if b, err := protocol.AppendValue(nil, val); err == nil {
			m[key] = b
		}
	}
	if o.Title != nil {
		set("title", *o.Title)
	}
	if o.Description != nil {
		set("description", *o.Description)
	}
	if tool && len(o.Annotations) > 0 {
		ann := map[string]json.RawMessage{}
		if old, ok := protocol.Members(m["annotations"]); ok && old != nil {
			ann = old
		}
		for k, val := range o.Annotations {
			if b, err := protocol.AppendValue(nil, val); err == nil {
				ann[k] = b
			}
		}
		set("annotations", ann)
	}
	out, err := protocol.AppendValue(nil, m)
	if err != nil {
		return def
	}
	return out
}

// heldBy is the upstreams of ups that v holds.
func heldBy(v *config.View, ups []*upstream) []*upstream {
	var out []*upstream
	for _, u := range ups {
		if v.Holds(u.name) {
			out = append(out, u)
		}
	}
	return out
}

// namedInstructions are v's own, else those of the servers it holds,
// sectioned as the aggregated view's.
func namedInstructions(v *config.View, ups []*upstream) string {
	if v.Instructions != nil {
		return *v.Instructions
	}
	return aggregateInstructions("", heldBy(v, ups))
}
