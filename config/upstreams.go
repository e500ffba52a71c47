package config

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
)

// This file holds the configuration of hosted MCP servers (docs/upstreams.md
// §1): the keyed section [upstreams] and the entry section mcpServers,
// whose entries are written as MCP clients write theirs (Claude Desktop,
// Claude Code's .mcp.json, Cursor, Cline), so that a block pasted from a
// client's JSON loads unchanged.

// Upstreams holds the settings shared by every hosted server.
type Upstreams struct {
	// Import lists client configuration files whose mcpServers (or VS
	// Code's servers) are hosted too, read at every load; entries of
	// snodod's own file win over imported ones of the same name, and an
	// earlier file wins over a later one. A missing file is a warning.
	Import []string `koanf:"import"`
	// MaxChildren caps the upstream processes running at once, all
	// upstreams and instances together; a start beyond it is refused
	// with -31002. >= 1.
	MaxChildren int `koanf:"max_children"`
	// MaxInFlight caps the requests one instance has in flight; more
	// wait in its queue. >= 1.
	MaxInFlight int `koanf:"max_in_flight"`
	// MaxQueued caps the requests waiting for one instance, served
	// round-robin by session; a request beyond it is refused with
	// -31003. >= 1.
	MaxQueued int `koanf:"max_queued"`
	// MaxParked caps the calls of 2026 clients parked on a legacy
	// upstream's elicitation or sampling, daemon-wide (docs/upstreams.md §6).
	// >= 1.
	MaxParked int `koanf:"max_parked"`
	// MaxServerRequests caps the requests hosted servers make (sampling,
	// elicitation, roots, ping) that wait at once for one session's
	// client, and that one instance holds unanswered; beyond it the
	// server's request is answered -32603 at once (docs/upstreams.md §5).
	// >= 1.
	MaxServerRequests int `koanf:"max_server_requests"`
	// StderrBytes is the stderr kept per upstream for `snodod logs` and
	// error messages. >= 1.
	StderrBytes int `koanf:"stderr_bytes"`
	// StderrTotalBytes caps the stderr kept by all upstreams together.
	// >= 1.
	StderrTotalBytes int `koanf:"stderr_total_bytes"`
	// DrainTimeout is how long a replaced or removed instance may finish
	// its in-flight requests after a reload before it is stopped. > 0.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// ListWait bounds how long a list (and a pass-through view's first
	// initialize) waits for a hosted server that has never been listed
	// and is starting, counted from the start of its start: later, the
	// list answers with what is ready or cached, and list_changed follows
	// when the server arrives (docs/upstreams.md §4). > 0.
	ListWait time.Duration `koanf:"list_wait"`
	// Pin pins the tool definitions of every hosted server whose entry
	// does not set pin itself (docs/views.md, "Pinned definitions").
	Pin bool `koanf:"pin"`
	// MaxTools is the aggregated view's tool budget (docs/views.md,
	// "Budgets"): the most tools/list shows, search_tools and call_tool
	// included; 0 means the connected client's known limit, and no budget
	// for a client the table does not know. A view's max_tools overrides it.
	MaxTools int `koanf:"max_tools"`
	// Always are the tools listed even over the budget: names as the
	// aggregated view shows them (fs__read_text_file), or path.Match
	// globs (fs__*). A view's always overrides it.
	Always []string `koanf:"always"`
}

// Upstream is one entry of mcpServers: how to start one MCP server and how
// to serve it. A *Config's entries are valid, and the values of its
// Program and Roots are expanded, except ${client.cwd}, which stays as
// written until Render replaces it for one client. Env values are
// secrets: nothing in this package prints or logs them.
type Upstream struct {
	// Name is the entry's name: mcpServers.<Name>.
	Name string
	// Program is the server's command, arguments, environment and working
	// directory; Cwd "" means the default of Share ($HOME for "all", the
	// client's working directory otherwise). A remote server has none.
	Program
	// Remote is set for a remote server (url): how to reach it.
	Remote *Remote
	// Disabled entries are configured but never started or listed.
	Disabled bool
	// Prefix names the upstream's tools and prompts in the aggregated
	// view: <Prefix>__<name>. [a-z0-9-]{1,16}.
	Prefix string
	// Share is "all", "cwd" or "session" (docs/upstreams.md §3).
	Share string
	// MaxInstances caps the instances of a "cwd" or "session" upstream.
	MaxInstances int
	// Start is "lazy", "eager" or "manual" (docs/upstreams.md §4).
	Start string
	// StartTimeout bounds a start: spawn, era probe, handshake, listing.
	StartTimeout time.Duration
	// RequestTimeout bounds one relayed request.
	RequestTimeout time.Duration
	// IdleTimeout stops an instance nothing used for that long; 0 never.
	IdleTimeout time.Duration
	// Protocol is "auto" (probe the era) or the version to speak.
	Protocol string
	// Tools, Prompts and Resources filter what is listed and callable.
	Tools, Prompts, Resources Filter
	// Roots are file:// URIs answered to the upstream's roots/list.
	Roots []string
	// Restart is the backoff after a crash.
	Restart Restart
	// PingInterval is the health ping's period; 0 disables it.
	PingInterval time.Duration
	// Pin holds a tool whose definition changed since it was first
	// listed out of every view until it is approved; PinNew ("hold" or
	// "allow") says whether a tool first listed later waits the same way.
	// Quarantine lists nothing of the server until it is approved once
	// (docs/views.md, "Pinned definitions").
	Pin        bool
	PinNew     string
	Quarantine bool
	pinGiven   bool // pin was written in the entry (else upstreams.pin)
	// Source is the file the entry came from: the configuration file, or
	// an imported client file.
	Source Source
	// Imported is true for an entry read from an upstreams.import file.
	Imported bool
	// Sandbox is how the server is confined: [sandbox] with the entry's
	// own sandbox over it; level off for a remote server. Home and Hide
	// are the daemon's to set.
	Sandbox sandbox.Policy
	sandbox settledSandbox

	// written is the entry's table as written, for Print (values before
	// expansion, so a ${file:…} secret is shown by its path).
	written map[string]any
}

// Filter selects items by name (tools, prompts) or URI (resources) with
// path.Match globs: an item is kept when Include is empty or one of its
// globs matches, and no Exclude glob matches (exclude wins).
type Filter struct {
	Include []string `key:"include"`
	Exclude []string `key:"exclude"`
}

// Allows reports whether name passes the filter.
func (f Filter) Allows(name string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, name); ok {
				return true
			}
		}
		return false
	}
	return (len(f.Include) == 0 || match(f.Include)) && !match(f.Exclude)
}

// Restart is the restart policy of a crashed upstream (docs/upstreams.md §4).
type Restart struct {
	// MaxAttempts consecutive failed starts make the upstream "failed".
	MaxAttempts int `key:"max_attempts,positive"`
	// InitialDelay is the first delay; each next one doubles, up to
	// MaxDelay, with ±20 % jitter.
	InitialDelay time.Duration `key:"initial_delay,positive"`
	MaxDelay     time.Duration `key:"max_delay,positive"`
	// ResetAfter of being ready clears the count of failures.
	ResetAfter time.Duration `key:"reset_after,positive"`
}

// The defaults of an entry's fields (docs/upstreams.md §1).
const (
	DefaultShare          = "all"
	DefaultStart          = "lazy"
	DefaultProtocol       = "auto"
	DefaultMaxInstances   = 8
	DefaultStartTimeout   = 120 * time.Second
	DefaultRequestTimeout = 10 * time.Minute
	DefaultIdleTimeout    = 30 * time.Minute
	DefaultPingInterval   = 30 * time.Second
	DefaultPinNew         = "hold"
)

// DefaultRestart is the restart policy when restart is not set, field by
// field.
var DefaultRestart = Restart{MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: 60 * time.Second, ResetAfter: 5 * time.Minute}

// UsesClientCwd reports whether the entry's program or roots use
// ${client.cwd}.
func (u *Upstream) UsesClientCwd() bool {
	return u.Program.UsesClientCwd() || slices.ContainsFunc(u.Roots, func(r string) bool { return strings.Contains(r, ClientCwd) })
}

// Render returns the command for an instance serving a client whose
// working directory is cwd (the daemon's for share "all"), with daemonEnv
// (os.Environ form) as the daemon's environment and home as $HOME: the
// working directory is Cwd, else home for share "all", else cwd.
func (u *Upstream) Render(cwd, home string, daemonEnv []string) Rendered {
	dir := cwd
	if u.Share == "all" {
		dir = home
	}
	r := u.Program.Render(cwd, dir, daemonEnv)
	for _, root := range u.Roots {
		r.Roots = append(r.Roots, strings.ReplaceAll(root, ClientCwd, cwd))
	}
	return r
}

// Upstream returns the enabled or disabled entry called name, or nil.
func (c *Config) Upstream(name string) *Upstream {
	i, ok := slices.BinarySearchFunc(c.MCPServers, name, func(u Upstream, n string) int { return cmp.Compare(u.Name, n) })
	if !ok {
		return nil
	}
	return &c.MCPServers[i]
}

// defaultPrefix derives a prefix from an entry's name (docs/upstreams.md §1):
// lowered, characters outside [a-z0-9-] made "-", cut to 16 characters.
func defaultPrefix(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !prefixByte(c) {
			b[i] = '-'
		}
	}
	if len(b) > maxPrefix {
		b = b[:maxPrefix]
	}
	return string(b)
}

const maxPrefix = 16

func validPrefix(p string) bool {
	if p == "" || len(p) > maxPrefix {
		return false
	}
	for i := range len(p) {
		if !prefixByte(p[i]) {
			return false
		}
	}
	return true
}

// prefixByte reports whether c may stand in a prefix: a-z, 0-9 or "-".
func prefixByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' }

// validName reports whether an entry's name can be used on a command line
// and in file names: 1 to 64 letters, digits, ".", "_" or "-", which is
// also the rule of tool and prompt names (entryName).
func validName(n string) bool { return entryName.MatchString(n) }

func entryKey(name, field string) string {
	k := "mcpServers." + tomlKey(name)
	if field != "" {
		k += "." + field
	}
	return k
}

func init() {
	registerEntrySection(&entrySection{name: "mcpServers", decode: decodeServers, print: printServers})
}

// decodeServers converts the file's mcpServers and the imported files'
// entries into c.MCPServers, sorted by name: every entry of snodod's own
// file, with every problem (an entry with problems still takes part in the
// checks that look at several, so that they all show at once), and the
// imported entries that have none.
func decodeServers(ctx entryContext, table map[string]any, c *Config) []Problem {
	d := &entryDecoder{}
	var own []Upstream
	for _, name := range slices.Sorted(maps.Keys(table)) {
		if u, ok := decodeServer(d, ctx, name, table[name], ctx.Source, false); ok {
			own = append(own, u)
		}
	}
	byName := map[string]bool{}
	for _, u := range own {
		byName[u.Name] = true
	}
	all := own
	for _, u := range imports(d, ctx, c.Upstreams.Import, byName) {
		byName[u.Name] = true
		all = append(all, u)
	}
	slices.SortFunc(all, func(a, b Upstream) int { return cmp.Compare(a.Name, b.Name) })
	prefixes := map[string]string{}
	for _, u := range all {
		if other, dup := prefixes[u.Prefix]; dup {
			serverField(d, u, "prefix").problem(fmt.Sprintf("must differ from the prefix of mcpServers.%s, got %s; set prefix to tell them apart", tomlKey(other), quote(u.Prefix)))
			continue
		}
		prefixes[u.Prefix] = u.Name
	}
	for i := range all {
		if !all[i].pinGiven {
			all[i].Pin = c.Upstreams.Pin
		}
	}
	c.MCPServers = all
	return d.problems
}

// serverField is the field of entry u named name ("" for the entry).
func serverField(d *entryDecoder, u Upstream, name string) field {
	f := field{d: d, key: entryKey(u.Name, ""), src: u.Source, note: importNote(u)}
	if name != "" {
		f.key += "." + name
	}
	return f
}

// importNote names the imported file an entry came from, for messages.
func importNote(u Upstream) string {
	if !u.Imported {
		return ""
	}
	return " (imported from " + u.Source.Name + ")"
}

// FormatDuration writes a duration as configurations do: "30m" rather
// than "30m0s", "1h" rather than "1h0m0s".
func FormatDuration(d time.Duration) string { return formatDuration(d) }

// StateDir returns snodod's state directory, where the upstreams' catalog
// cache and process record live: $XDG_STATE_HOME/snodod when
// XDG_STATE_HOME is an absolute path, else $HOME/.local/state/snodod,
// else "" (none). env is in os.Environ form; nil means the process's.
func StateDir(env []string) string {
	m := envMap(env)
	if d := m["XDG_STATE_HOME"]; filepath.IsAbs(d) {
		return filepath.Join(d, "snodod")
	}
	if h := m["HOME"]; h != "" {
		return filepath.Join(h, ".local", "state", "snodod")
	}
	return ""
}
