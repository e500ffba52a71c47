package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// This file holds the [views.NAME] entries (docs/views.md): named
// filters over the aggregated view, each a client's subset of the hosted
// servers' tools, resources and prompts, reached by snodod connect --view
// NAME and by HTTP at http.path + "/@NAME".

// View is one [views.NAME] entry. A *Config's views are valid: every
// server they name is configured, every glob compiles.
type View struct {
	// Name is the entry's name: views.<Name>.
	Name string
	// Servers are the hosted servers the view holds, by mcpServers name,
	// sorted; nil (no servers key) holds every configured one.
	Servers []string
	// Tools, Resources and Prompts filter the view's items by the names it
	// shows (<prefix>__<name>, before Rename) or URIs.
	Tools, Resources, Prompts Filter
	// Rename lists new names for tools and prompts, by the name the
	// aggregated view shows (gh__search_repositories = "search_repos").
	Rename map[string]string
	// Override changes the definitions of tools and prompts, by the name
	// the view shows (after Rename).
	Override map[string]ViewOverride
	// Instructions, when set, replace the held servers' instructions.
	Instructions *string
	// AllowedUIDs, when set, are the uids that may open the view besides
	// the daemon's own (socket peers by SO_PEERCRED, local HTTP peers);
	// when empty, the daemon's rule applies (its own uid and
	// daemon.allowed_uids).
	AllowedUIDs []int
	// MaxTools is the view's tool budget and Always the tools it always
	// lists (docs/views.md, Budgets); 0 and nil leave upstreams.max_tools
	// and upstreams.always in force.
	MaxTools int
	Always   []string
}

// ViewOverride is one [views.NAME.override.ITEM] table: what replaces the
// item's own title, description and annotations (merged member by member
// over the tool's own; tools only).
type ViewOverride struct {
	Title       *string        `key:"title"`
	Description *string        `key:"description"`
	Annotations annotationsMap `key:"annotations"`
}

// View returns the view named name, or nil.
func (c *Config) View(name string) *View {
	for i := range c.Views {
		if c.Views[i].Name == name {
			return &c.Views[i]
		}
	}
	return nil
}

// ViewNames lists the configured views, sorted.
func (c *Config) ViewNames() []string {
	out := make([]string, 0, len(c.Views))
	for _, v := range c.Views {
		out = append(out, v.Name)
	}
	return out
}

// viewEntry is a [views.NAME] entry as written.
type viewEntry struct {
	Servers      *[]string               `key:"servers"`
	Tools        Filter                  `key:"tools"`
	Resources    Filter                  `key:"resources"`
	Prompts      Filter                  `key:"prompts"`
	Rename       renameMap               `key:"rename"`
	Override     map[string]ViewOverride `key:"override"`
	Instructions *string                 `key:"instructions"`
	AllowedUIDs  uidList                 `key:"allowed_uids"`
	MaxTools     int                     `key:"max_tools"`
	Always       []string                `key:"always"`
}

// renameMap is a table of old name = new name.
type renameMap map[string]string

func (r *renameMap) decodeEntry(f field, raw any) {
	t, ok := raw.(map[string]any)
	if !ok {
		f.problem(`must be a table of names, such as { "gh__search_repositories" = "search_repos" }, got ` + literal(raw))
		return
	}
	out := renameMap{}
	to := map[string]string{}
	for _, old := range slices.Sorted(maps.Keys(t)) {
		s, ok := t[old].(string)
		switch {
		case !ok:
			f.child(old).problem("must be a string, got " + literal(t[old]))
		case !toolName(s):
			f.child(old).problem("must be a tool or prompt name: 1 to 64 letters, digits, _, - or ., got " + quote(s))
		case to[s] != "":
			f.child(old).problem(fmt.Sprintf("renames to %s as %s does; give each its own name", quote(s), quote(to[s])))
		default:
			out[old] = s
			to[s] = old
		}
	}
	*r = out
}

func toolName(s string) bool { return entryName.MatchString(s) }

// annotationsMap is a table of annotation hints: booleans, or text (title).
type annotationsMap map[string]any

func (a *annotationsMap) decodeEntry(f field, raw any) {
	t, ok := raw.(map[string]any)
	if !ok {
		f.problem("must be a table of annotations, such as { readOnlyHint = true }, got " + literal(raw))
		return
	}
	out := annotationsMap{}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		switch v := t[k].(type) {
		case bool, string:
			out[k] = v
		default:
			f.child(k).problem("must be true, false or a string, got " + literal(t[k]))
		}
	}
	*a = out
}

// uidList is a list of user ids.
type uidList []int

func (u *uidList) decodeEntry(f field, raw any) {
	items, ok := raw.([]any)
	if !ok {
		f.problem("must be a list of user ids, got " + literal(raw))
		return
	}
	var out uidList
	for _, it := range items {
		n, ok := toInt(it)
		if _, text := it.(string); text || !ok || !validUID(n) {
			f.problem("entries must be user ids from 0 to 4294967294, got " + literal(it))
			continue
		}
		out = append(out, n)
	}
	*u = out
}

func init() {
	registerEntrySection(&entrySection{name: "views", decode: decodeViews})
}

// decodeViews converts [views.NAME] into c.Views, sorted by name; it runs
// after mcpServers (sections are decoded in name order), so the servers a
// view names are checked against the configured ones.
func decodeViews(ctx entryContext, table map[string]any, c *Config) []Problem {
	d := &entryDecoder{}
	servers := map[string]bool{}
	var names []string
	for _, u := range c.MCPServers {
		servers[u.Name] = true
		names = append(names, u.Name)
	}
	eachEntry(d, "views", "view", ctx.Source, table, func(f field, name string, raw any) {
		var e viewEntry
		if !f.table(raw, &e) {
			return
		}
		v := View{Name: name, Tools: e.Tools, Resources: e.Resources, Prompts: e.Prompts, Rename: e.Rename,
			Override: e.Override, Instructions: e.Instructions, AllowedUIDs: e.AllowedUIDs, MaxTools: e.MaxTools, Always: e.Always}
		if e.Servers != nil {
			v.Servers = []string{}
			for _, s := range *e.Servers {
				if !servers[s] {
					known := "none is configured"
					if len(names) > 0 {
						known = "the configured ones are " + strings.Join(names, ", ")
					}
					f.child("servers").problem(fmt.Sprintf("names %s, which is no mcpServers entry; %s", quote(s), known))
					continue
				}
				if !slices.Contains(v.Servers, s) {
					v.Servers = append(v.Servers, s)
				}
			}
			slices.Sort(v.Servers)
		}
		if e.MaxTools != 0 && e.MaxTools < 3 {
			f.child("max_tools").problem(fmt.Sprintf("must be 0 (upstreams.max_tools applies) or an integer of at least 3 (search_tools, call_tool and one more), got %d", e.MaxTools))
		}
		c.Views = append(c.Views, v)
	})
	return d.problems
}

// Holds reports whether the view holds the hosted server name.
func (v *View) Holds(name string) bool {
	return v.Servers == nil || slices.Contains(v.Servers, name)
}
