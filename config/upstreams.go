package config

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
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
}

// Upstream is one entry of mcpServers: how to start one MCP server and how
// to serve it. A *Config's entries are valid, and the values of Command,
// Args, Env, Cwd and Roots are expanded, except ${client.cwd}, which stays
// as written until Render replaces it for one client. Env values are
// secrets: nothing in this package prints or logs them.
type Upstream struct {
	// Name is the entry's name: mcpServers.<Name>.
	Name string
	// Command is the program, executed directly, never through a shell.
	Command string
	// Args are its arguments.
	Args []string
	// Env is set in the child's environment over the inherited variables.
	Env map[string]string
	// InheritEnv says which of the daemon's variables the child gets.
	InheritEnv InheritEnv
	// Cwd is the working directory; "" means the default of Share ($HOME
	// for "all", the client's working directory otherwise).
	Cwd string
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
	// Source is the file the entry came from: the configuration file, or
	// an imported client file.
	Source Source
	// Imported is true for an entry read from an upstreams.import file.
	Imported bool

	// written is the entry's table as written, for Print (values before
	// expansion, so a ${file:…} secret is shown by its path).
	written map[string]any
}

// InheritEnv is which variables of the daemon's environment a child gets.
type InheritEnv struct {
	// All passes every variable.
	All bool
	// Names are the variables passed when All is false; a name ending in
	// "*" matches every variable with that prefix.
	Names []string
}

// DefaultInheritEnv is the allow-list a child gets when inherit_env is
// not set.
var DefaultInheritEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_*", "TZ", "TMPDIR", "XDG_*"}

// Allows reports whether the variable name is inherited.
func (ie InheritEnv) Allows(name string) bool {
	if ie.All {
		return true
	}
	for _, n := range ie.Names {
		if p, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(name, p) || n == name {
			return true
		}
	}
	return false
}

// Filter selects items by name (tools, prompts) or URI (resources) with
// path.Match globs: an item is kept when Include is empty or one of its
// globs matches, and no Exclude glob matches (exclude wins).
type Filter struct {
	Include, Exclude []string
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
	MaxAttempts int
	// InitialDelay is the first delay; each next one doubles, up to
	// MaxDelay, with ±20 % jitter.
	InitialDelay, MaxDelay time.Duration
	// ResetAfter of being ready clears the count of failures.
	ResetAfter time.Duration
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
)

// DefaultRestart is the restart policy when restart is not set, field by
// field.
var DefaultRestart = Restart{MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: 60 * time.Second, ResetAfter: 5 * time.Minute}

// ClientCwd is the expansion that Render replaces with a client's working
// directory.
const ClientCwd = "${client.cwd}"

// UsesClientCwd reports whether the entry's command, arguments,
// environment, working directory or roots use ${client.cwd}.
func (u *Upstream) UsesClientCwd() bool {
	if strings.Contains(u.Command, ClientCwd) || strings.Contains(u.Cwd, ClientCwd) {
		return true
	}
	for _, s := range u.Args {
		if strings.Contains(s, ClientCwd) {
			return true
		}
	}
	for _, s := range u.Roots {
		if strings.Contains(s, ClientCwd) {
			return true
		}
	}
	for _, v := range u.Env {
		if strings.Contains(v, ClientCwd) {
			return true
		}
	}
	return false
}

// Rendered is an entry's command for one instance, ${client.cwd} replaced.
type Rendered struct {
	Command string
	Args    []string
	// Env is the child's whole environment, KEY=VALUE, sorted: the
	// inherited variables, then Env over them.
	Env []string
	// Dir is the working directory.
	Dir   string
	Roots []string
}

// Render returns the command for an instance serving a client whose
// working directory is cwd (the daemon's for share "all"), with daemonEnv
// (os.Environ form) as the daemon's environment and home as $HOME.
func (u *Upstream) Render(cwd, home string, daemonEnv []string) Rendered {
	sub := func(s string) string { return strings.ReplaceAll(s, ClientCwd, cwd) }
	r := Rendered{Command: sub(u.Command), Args: make([]string, len(u.Args))}
	for i, a := range u.Args {
		r.Args[i] = sub(a)
	}
	env := map[string]string{}
	for _, kv := range daemonEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && u.InheritEnv.Allows(k) {
			env[k] = v
		}
	}
	for k, v := range u.Env {
		env[k] = sub(v)
	}
	for k, v := range env {
		r.Env = append(r.Env, k+"="+v)
	}
	slices.Sort(r.Env)
	switch {
	case u.Cwd != "":
		r.Dir = sub(u.Cwd)
	case u.Share == "all":
		r.Dir = home
	default:
		r.Dir = cwd
	}
	for _, root := range u.Roots {
		r.Roots = append(r.Roots, sub(root))
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
// entries into c.MCPServers, sorted by name.
func decodeServers(ctx entryContext, table map[string]any, c *Config) []Problem {
	d := &serverDecoder{ctx: ctx, c: c}
	own := d.entries(table, ctx.Source, false)
	byName := map[string]bool{}
	for _, u := range own {
		byName[u.Name] = true
	}
	all := own
	for _, u := range d.imports() {
		if !byName[u.Name] {
			byName[u.Name] = true
			all = append(all, u)
		}
	}
	slices.SortFunc(all, func(a, b Upstream) int { return cmp.Compare(a.Name, b.Name) })
	prefixes := map[string]string{}
	for _, u := range all {
		if other, dup := prefixes[u.Prefix]; dup {
			d.problem(u, "prefix", fmt.Sprintf("must differ from the prefix of mcpServers.%s, got %s; set prefix to tell them apart", other, quote(u.Prefix)))
			continue
		}
		prefixes[u.Prefix] = u.Name
	}
	c.MCPServers = all
	return d.problems
}

// serverDecoder collects the problems and warnings of the entries.
type serverDecoder struct {
	ctx      entryContext
	c        *Config
	problems []Problem
}

func (d *serverDecoder) problem(u Upstream, field, msg string) {
	d.problems = append(d.problems, Problem{Key: entryKey(u.Name, field), Message: msg + importNote(u), Source: u.Source})
}

func (d *serverDecoder) warn(u Upstream, field, msg string) {
	d.problems = append(d.problems, Problem{Key: entryKey(u.Name, field), Message: msg + importNote(u), Source: u.Source, Warning: true})
}

// errors counts the problems that are not warnings.
func (d *serverDecoder) errors() int {
	n := 0
	for _, p := range d.problems {
		if !p.Warning {
			n++
		}
	}
	return n
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
