package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// The views (docs/upstreams.md §2): what a session sees of the upstreams.
//
// The aggregated view is the daemon's own server (its catalog first) with
// every enabled upstream's items relayed under <prefix>__<name>, each
// upstream its own owner (server.ReplaceRelayed), instructions sectioned
// by prefix. A pass-through view is a server of its own per upstream,
// with the upstream's names, serverInfo, instructions and capabilities.
// Collisions are settled by the configuration alone: the daemon's own
// catalog first, then upstreams in name order; a later claimant is not
// listed and is reported by status.

// passOwner owns a pass-through server's relayed items.
const passOwner = "upstream"

// maxToolName is the longest composed name clients accept
// (^[a-zA-Z0-9_-]{1,64}$ at several model providers).
const maxToolName = 64

// composeName is <prefix>__<name>, shortened over 64 characters to its
// first 55, "_" and 8 hex digits of the SHA-256 of the full name.
func composeName(prefix, name string) string {
	full := prefix + "__" + name
	if len(full) <= maxToolName {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return full[:55] + "_" + hex.EncodeToString(sum[:4])
}

// Attach makes srv, a daemon server built from one configuration
// generation, show the aggregated view; instructions are the daemon's own
// (server.instructions), to which each upstream's are appended. srv is
// kept current until detach, which its owner calls once no session uses
// srv any more.
func (m *Manager) Attach(srv *server.Server, instructions string) (detach func()) {
	srv.SetSubscriptionHook(&viewHook{m: m, srv: srv})
	srv.SetStartHook(startHook{m: m})
	srv.SetToolListFilter(m.toolListFilter(srv))
	m.mu.Lock()
	m.aggregates[srv] = instructions
	m.mu.Unlock()
	m.refreshViews()
	return func() {
		m.mu.Lock()
		delete(m.aggregates, srv)
		delete(m.metas, srv)
		delete(m.viewTools, srv)
		m.mu.Unlock()
	}
}

// AttachView makes srv show upstream name passed through (docs/upstreams.md
// §2): its names, serverInfo, instructions and capabilities. srv is one
// of catalog.ViewServer's, the factory of the aggregated view's server
// too, so that both sign with server.state_key_file. It is kept current
// until detach, which its owner calls once no session uses srv any more.
// A name no upstream has (yet: a reload attaches the views of its
// configuration before Apply) lists nothing until one has it.
func (m *Manager) AttachView(srv *server.Server, name string) (detach func()) {
	srv.SetSubscriptionHook(&viewHook{m: m, srv: srv, upstream: name})
	srv.SetStartHook(startHook{m: m, view: name})
	if o := m.opts.Observer; o != nil {
		if st, ok := o.(server.RequestStarter); ok {
			srv.SetObserver(passStarter{passObserver{o: o, upstream: name}, st})
		} else if idler, ok := o.(server.Idler); ok {
			srv.SetObserver(passIdler{passObserver{o: o, upstream: name}, idler})
		} else {
			srv.SetObserver(passObserver{o: o, upstream: name})
		}
	}
	srv.SetReadFallback(m.handler(name, "resources/read", ""))
	m.mu.Lock()
	m.passViews[srv] = name
	m.mu.Unlock()
	m.refreshViews()
	return func() {
		m.mu.Lock()
		delete(m.passViews, srv)
		m.mu.Unlock()
	}
}

// refreshViews recomputes every view from the upstreams' catalogs and
// configuration; the servers announce what changed.
func (m *Manager) refreshViews() {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	ups := m.sorted()
	m.settlePins(ups)
	all := true
	for _, u := range ups {
		all = all && (u.conf().Disabled || u.currentCatalog() != nil)
	}
	m.allListed.Store(all)
	m.mu.Lock()
	aggs := maps.Clone(m.aggregates)
	passes := maps.Clone(m.passViews)
	named := maps.Clone(m.named)
	m.mu.Unlock()

	sets, collided := m.aggregateItems(ups)
	m.countUsage(aggregatedView, sets)
	for srv, instructions := range aggs {
		withMeta := maps.Clone(sets)
		meta := m.chooseMetaNames(srv)
		withMeta[budgetOwner] = m.metaItems(srv, meta)
		refused := srv.ReplaceRelayed(withMeta)
		vt := m.buildViewTools(srv, aggregatedView, sets, meta)
		m.mu.Lock()
		if _, attached := m.aggregates[srv]; attached {
			m.viewTools[srv] = vt
		}
		m.mu.Unlock()
		for owner, names := range refused {
			if owner == budgetOwner {
				continue // chooseMetaNames picked names the catalog does not hold
			}
			for _, n := range names {
				collided[owner] = append(collided[owner], n+" (taken by snodod's own catalog)")
			}
		}
		srv.SetInstructions(aggregateInstructions(instructions, ups))
		srv.Advertise(aggregateCapabilities(ups))
	}
	m.mu.Lock()
	m.collided = collided
	m.mu.Unlock()
	for srv, v := range named {
		// A named view's budget is the aggregated view's, over its own
		// items (docs/views.md, Budgets).
		items := namedItems(v, sets)
		m.countUsage(namedUsage(v), items)
		meta := m.chooseMetaNames(srv)
		withMeta := maps.Clone(items)
		withMeta[budgetOwner] = m.metaItems(srv, meta)
		srv.ReplaceRelayed(withMeta)
		vt := m.buildViewTools(srv, namedUsage(v), items, meta)
		m.mu.Lock()
		if m.named[srv] != nil {
			m.viewTools[srv] = vt
		}
		m.mu.Unlock()
		srv.SetInstructions(namedInstructions(v, ups))
		srv.Advertise(aggregateCapabilities(heldBy(v, ups)))
	}

	byName := map[string]*upstream{}
	for _, u := range ups {
		byName[u.name] = u
	}
	for srv, name := range passes {
		u := byName[name]
		if u == nil {
			srv.ReplaceRelayed(map[string]server.RelayedItems{passOwner: {}})
			continue
		}
		// The server's identity before its items: ReplaceRelayed announces
		// list_changed, and a client that initializes on hearing it must
		// meet the server it lists, not the placeholder.
		if cat := u.currentCatalog(); cat == nil {
			srv.Advertise(protocol.ServerCapabilities{Tools: true, Prompts: true, Resources: true, ResourcesSubscribe: true})
		} else {
			var info protocol.Implementation
			if json.Unmarshal(cat.ServerInfo, &info) == nil && info.Name != "" {
				srv.SetInfo(info)
			}
			if u.quarantined() {
				srv.SetInstructions("") // nothing of it is shown before its approval
			} else {
				srv.SetInstructions(cat.Instructions)
			}
			srv.Advertise(advertised(parseCapabilities(cat.Capabilities)))
		}
		srv.ReplaceRelayed(map[string]server.RelayedItems{passOwner: m.items(u, func(n string) string { return n }, nil)})
	}
}

// aggregateItems settles the aggregated view's names: each enabled
// upstream's filtered items under composed names, first claimant (in name
// order) keeping a name. Every current upstream, and every owner relayed
// before, gets a set, so a removed upstream's items go.
func (m *Manager) aggregateItems(ups []*upstream) (map[string]server.RelayedItems, map[string][]string) {
	sets := map[string]server.RelayedItems{}
	collided := map[string][]string{}
	claimed := map[string]string{}
	shortened := map[string][]string{}
	for _, u := range ups {
		prefix := u.conf().Prefix
		sets[u.name] = m.items(u, func(n string) string {
			c := composeName(prefix, n)
			if len(c) < len(prefix)+2+len(n) && !slices.Contains(shortened[u.name], n+" as "+c) {
				shortened[u.name] = append(shortened[u.name], n+" as "+c)
			}
			return c
		}, func(key string) bool {
			if other, taken := claimed[key]; taken {
				collided[u.name] = append(collided[u.name], key+" (taken by mcpServers."+other+")")
				return false
			}
			claimed[key] = u.name
			return true
		})
	}
	m.mu.Lock()
	m.shortened = shortened
	for _, owner := range m.formerOwners {
		if _, ok := sets[owner]; !ok {
			sets[owner] = server.RelayedItems{}
		}
	}
	m.formerOwners = m.formerOwners[:0]
	for _, u := range ups {
		m.formerOwners = append(m.formerOwners, u.name)
	}
	m.mu.Unlock()
	return sets, collided
}

// items is u's catalog as relayed items, filtered by the configuration,
// names mapped by name (tools and prompts; URIs are never rewritten); claim,
// when set, is asked for every listed key ("tool NAME", "prompt NAME",
// "resource URI", "template URITEMPLATE") and refuses those taken.
func (m *Manager) items(u *upstream, name func(string) string, claim func(string) bool) server.RelayedItems {
	cfg := u.conf()
	cat := u.currentCatalog()
	var out server.RelayedItems
	if cfg.Disabled || cat == nil || u.quarantined() {
		return out
	}
	ok := func(key string) bool { return claim == nil || claim(key) }
	for _, def := range cat.Tools {
		if n, valid := itemKey(def, "name"); valid && cfg.Tools.Allows(n) && !u.heldTool(n) {
			if shown := name(n); ok("tool " + shown) {
				out.Tools = append(out.Tools, server.RawTool{Name: shown, Definition: def, Handler: m.handler(u.name, "tools/call", n)})
			}
		}
	}
	for _, def := range cat.Prompts {
		if n, valid := itemKey(def, "name"); valid && cfg.Prompts.Allows(n) {
			if shown := name(n); ok("prompt " + shown) {
				out.Prompts = append(out.Prompts, server.RawPrompt{Name: shown, Definition: def,
					Handler: m.handler(u.name, "prompts/get", n), Complete: m.handler(u.name, "completion/complete", n)})
			}
		}
	}
	for _, def := range cat.Resources {
		if uri, valid := itemKey(def, "uri"); valid && cfg.Resources.Allows(uri) && ok("resource "+uri) {
			out.Resources = append(out.Resources, server.RawResource{URI: uri, Definition: def, Handler: m.handler(u.name, "resources/read", "")})
		}
	}
	for _, def := range cat.Templates {
		if t, valid := itemKey(def, "uriTemplate"); valid && cfg.Resources.Allows(t) && ok("template "+t) {
			out.Templates = append(out.Templates, server.RawTemplate{URITemplate: t, Definition: def,
				Handler: m.handler(u.name, "resources/read", ""), Complete: m.handler(u.name, "completion/complete", "")})
		}
	}
	return out
}

// aggregateInstructions appends each upstream's instructions under a
// "## <prefix>" heading, in name order (docs/upstreams.md §2).
func aggregateInstructions(own string, ups []*upstream) string {
	var b strings.Builder
	b.WriteString(own)
	for _, u := range ups {
		cat := u.currentCatalog()
		if u.conf().Disabled || cat == nil || u.quarantined() || strings.TrimSpace(cat.Instructions) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## " + u.conf().Prefix + "\n\n" + strings.TrimSpace(cat.Instructions))
	}
	return b.String()
}

// aggregateCapabilities is what the aggregated view advertises for its
// upstreams: what each declared, and everything for one not listed yet
// (a legacy client reads capabilities once, at initialize).
func aggregateCapabilities(ups []*upstream) protocol.ServerCapabilities {
	var c protocol.ServerCapabilities
	for _, u := range ups {
		if u.conf().Disabled {
			continue
		}
		cat := u.currentCatalog()
		if cat == nil {
			c.Tools, c.Prompts, c.Resources, c.ResourcesSubscribe = true, true, true, true
			continue
		}
		a := advertised(parseCapabilities(cat.Capabilities))
		c.Tools, c.Prompts, c.Resources = c.Tools || a.Tools, c.Prompts || a.Prompts, c.Resources || a.Resources
		c.ResourcesSubscribe, c.Completions = c.ResourcesSubscribe || a.ResourcesSubscribe, c.Completions || a.Completions
	}
	return c
}

func advertised(caps capabilities) protocol.ServerCapabilities {
	return protocol.ServerCapabilities{
		Tools: caps.Tools != nil, Prompts: caps.Prompts != nil, Resources: caps.Resources != nil,
		ResourcesSubscribe: caps.Resources != nil && caps.Resources.Subscribe, Completions: caps.Completions != nil,
	}
}

// viewHook hears a view's resource subscriptions and holds them on the
// upstream that serves the URI (docs/upstreams.md §5).
type viewHook struct {
	m        *Manager
	srv      *server.Server
	upstream string // a pass-through view's upstream; "" for the aggregated view
}

func (h *viewHook) owner(uri string) string {
	if h.upstream != "" {
		return h.upstream
	}
	owner, _ := h.srv.RelayOwner(uri)
	return owner
}

func (h *viewHook) Subscribe(sess *server.SessionState, uri string) {
	if name := h.owner(uri); name != "" {
		h.m.hold(h.m.clientOf(sess.Caller()), subscription{upstream: name, uri: uri})
	}
}

func (h *viewHook) Unsubscribe(sess *server.SessionState, uri string) {
	if name := h.owner(uri); name != "" {
		h.m.drop(h.m.clientOf(sess.Caller()), subscription{upstream: name, uri: uri})
	}
}

// hold counts one subscription of c; the client's first to a URI holds it
// on the instance serving c (the instance's first subscribes upstream).
func (m *Manager) hold(c *Client, sub subscription) {
	if c != nil {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		if c.subs == nil {
			c.subs = map[subscription]int{}
		}
		c.subs[sub]++
		first := c.subs[sub] == 1
		c.mu.Unlock()
		if !first {
			return
		}
	}
	if u := m.upstream(sub.upstream); u != nil {
		if in, err := u.instanceFor(c); err == nil {
			in.subscribe(sub.uri)
		}
	}
}

// drop undoes one hold; the client's last of a URI releases it on the
// instance (the instance's last unsubscribes upstream).
func (m *Manager) drop(c *Client, sub subscription) {
	if c != nil {
		c.mu.Lock()
		n := c.subs[sub]
		switch {
		case n > 1:
			c.subs[sub] = n - 1
		case n == 1:
			delete(c.subs, sub)
		}
		c.mu.Unlock()
		if n != 1 {
			return
		}
	}
	m.unhold(c, sub)
}

// unhold releases c's hold of sub on the instance serving c: drop's last,
// or any of a closing client's.
func (m *Manager) unhold(c *Client, sub subscription) {
	if u := m.upstream(sub.upstream); u != nil {
		if in, err := u.instanceFor(c); err == nil {
			in.unsubscribe(sub.uri)
		}
	}
}

// resourceUpdated tells every view showing upstream name that uri changed;
// the runtime delivers it to the sessions subscribed to it only.
func (m *Manager) resourceUpdated(name, uri string) {
	m.mu.Lock()
	var srvs []*server.Server
	for s := range m.aggregates {
		srvs = append(srvs, s)
	}
	for s, n := range m.passViews {
		if n == name {
			srvs = append(srvs, s)
		}
	}
	for s, v := range m.named {
		if v.Holds(name) {
			srvs = append(srvs, s)
		}
	}
	m.mu.Unlock()
	for _, s := range srvs {
		s.ResourceUpdated(uri)
	}
}

// passObserver tells the daemon's Observer of a pass-through view's
// requests: everything relayed there is its one upstream's, read
// fallbacks included.
type passObserver struct {
	o        server.Observer
	upstream string
}

func (p passObserver) RequestEnded(e server.RequestEnd) {
	if e.Relayed {
		e.Owner = p.upstream
	}
	p.o.RequestEnded(e)
}

// passStarter is passObserver for an Observer that is a RequestStarter
// too (the traces'): it is told of the start as well.
type passStarter struct {
	passObserver
	st server.RequestStarter
}

// passIdler is passObserver for an Observer that may be idle (the audit
// log's alone, while it is off: server.Idler).
type passIdler struct {
	passObserver
	idler server.Idler
}

func (p passIdler) Idle() bool { return p.idler.Idle() }

func (p passStarter) RequestStarted(ctx context.Context, s *server.RequestStart) context.Context {
	return p.st.RequestStarted(ctx, s)
}
