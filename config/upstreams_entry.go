package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// serverEntry is an mcpServers entry as written: snodod's own snake_case
// fields and those MCP clients write (Claude Desktop, Claude Code's
// .mcp.json, Cursor, Cline, VS Code's servers), so that a block pasted from
// a client's JSON loads unchanged.
type serverEntry struct {
	programEntry
	// Type is the transport: "stdio" (a server snodod starts, the default
	// without url), "http" (the default with url; "streamable-http" and
	// "streamableHttp" are its other spellings) or "sse".
	Type string `key:"type"`
	// remoteEntry holds the fields of a remote server (url).
	remoteEntry
	Disabled       *bool          `key:"disabled"`
	Enabled        *bool          `key:"enabled"`
	Prefix         *string        `key:"prefix"`
	Share          string         `key:"share,oneof=all|cwd|session"`
	MaxInstances   int            `key:"max_instances,positive"`
	Start          string         `key:"start,oneof=lazy|eager|manual"`
	StartTimeout   time.Duration  `key:"start_timeout,positive"`
	RequestTimeout *time.Duration `key:"request_timeout,positive"`
	// Timeout is the clients' spelling of request_timeout, in seconds.
	Timeout      *clientTimeout `key:"timeout"`
	IdleTimeout  time.Duration  `key:"idle_timeout,never"`
	Protocol     string         `key:"protocol,oneof=auto|2025-06-18|2025-11-25|2026-07-28"`
	Tools        Filter         `key:"tools"`
	Prompts      Filter         `key:"prompts"`
	Resources    Filter         `key:"resources"`
	Roots        []string       `key:"roots"`
	Restart      Restart        `key:"restart"`
	PingInterval time.Duration  `key:"ping_interval,never"`
	// Pin, PinNew and Quarantine are the rug-pull protection
	// (docs/views.md, "Pinned definitions"); pin unset is upstreams.pin.
	Pin        *bool  `key:"pin"`
	PinNew     string `key:"pin_new,oneof=hold|allow"`
	Quarantine bool   `key:"quarantine"`
	// The keys clients write that snodod accepts and ignores, reported
	// once as a warning.
	AlwaysAllow   ignoredKey `key:"alwaysAllow"`
	AutoApprove   ignoredKey `key:"autoApprove"`
	TransportType ignoredKey `key:"transportType"`
	WatchPaths    ignoredKey `key:"watchPaths"`
}

func (e *serverEntry) setDefaults() {
	e.programEntry.setDefaults()
	e.Type, e.Share, e.Start, e.Protocol = "stdio", DefaultShare, DefaultStart, DefaultProtocol
	e.MaxInstances = DefaultMaxInstances
	e.StartTimeout, e.IdleTimeout, e.PingInterval = DefaultStartTimeout, DefaultIdleTimeout, DefaultPingInterval
	e.Restart = DefaultRestart
	e.PinNew = DefaultPinNew
}

// decodeServer decodes, provisions and validates the entry name, every
// problem recorded in d. ok is false for an entry that is not one (a bad
// name, not a table).
func decodeServer(d *entryDecoder, ctx entryContext, name string, raw any, src Source, imported bool) (Upstream, bool) {
	u := Upstream{Name: name, Source: src, Imported: imported}
	f := serverField(d, u, "")
	if !validName(name) {
		f.problem(`must be named with 1 to 64 letters, digits, ".", "_" or "-" (it is used on command lines: snodod connect NAME), got ` + quote(name))
		return u, false
	}
	fields, isTable := raw.(map[string]any)
	if !isTable {
		f.problem("must be a table of fields (command, args, env, …, or url for a remote server), got " + literal(raw))
		return u, false
	}
	var e serverEntry
	e.setDefaults()
	if RemoteKey(fields) != "" && !hasKey(fields, "type") {
		e.Type = "http"
	}
	f.table(raw, &e)
	u.written = fields
	r := ctx.rules(true)
	r.base = filepath.Dir(src.Name)
	if e.Type == "streamable-http" || e.Type == "streamableHttp" {
		e.Type = "http"
	}
	if _, hasURL := e.urlValue(); hasURL || e.Type == "http" || e.Type == "sse" {
		if !hasURL && !hasKey(fields, "url") && !hasKey(fields, "serverUrl") {
			f.child("url").problem(fmt.Sprintf("is required with type = %q: the remote server's URL, such as \"https://example.com/mcp\"", e.Type))
		} else if e.Type == "stdio" {
			f.child("type").problem(`must be "http" or "sse" with url ("stdio" is a server snodod starts), got "stdio"`)
		}
		if e.Sandbox.given {
			f.child("sandbox").problem("is a field of a server snodod starts: a remote server runs elsewhere")
		}
		u.Remote = e.remote(f, r, fields)
		u.Roots = e.roots(f, r)
		e.settle(f, &u)
		serverWarnings(f, &u, &e)
		return u, true
	}
	u.sandbox = e.Sandbox.settle(f, r)
	for _, k := range []string{"headers", "tls_ca_file", "allow_insecure_http", "oauth"} {
		if hasKey(fields, k) {
			f.child(k).problem("is a field of a remote server; add its url, or remove it")
		}
	}
	// Provisioning: the expansions, and what config check looks up.
	u.Program = e.provision(f, r)
	u.Roots = e.roots(f, r)
	if r.check {
		if u.Command != "" && !strings.Contains(u.Command, ClientCwd) && !e.shellLine() {
			resolveCommand(f.child("command"), u.Command, u.Program.Render("", "", environ(ctx.Env)).Env, r)
		}
		if u.Cwd != "" && !strings.HasPrefix(u.Cwd, ClientCwd) {
			checkDir(f.child("cwd"), u.Cwd)
		}
	}
	// Validation.
	e.validate(f)
	e.settle(f, &u)
	if imported && u.Share == DefaultShare && !hasKey(fields, "share") && u.UsesClientCwd() {
		u.Share = "cwd" // a client's ${workspaceFolder}: one instance per folder, as the client runs it
	}
	serverWarnings(f, &u, &e)
	return u, true
}

func hasKey(fields map[string]any, k string) bool { _, ok := fields[k]; return ok }

// settle checks the fields that go together and sets u's from e's.
func (e *serverEntry) settle(f field, u *Upstream) {
	u.Share, u.MaxInstances, u.Start, u.Protocol = e.Share, e.MaxInstances, e.Start, e.Protocol
	u.StartTimeout, u.RequestTimeout, u.IdleTimeout = e.StartTimeout, DefaultRequestTimeout, e.IdleTimeout
	u.Tools, u.Prompts, u.Resources = e.Tools, e.Prompts, e.Resources
	u.Restart, u.PingInterval = e.Restart, e.PingInterval
	u.PinNew, u.Quarantine = e.PinNew, e.Quarantine
	if e.Pin != nil {
		u.Pin, u.pinGiven = *e.Pin, true
	}
	if e.Type != "stdio" && !slices.Contains(remoteTypes, e.Type) {
		f.child("type").problem(`must be "stdio" (a server snodod starts; "http" and "sse" are remote servers), got ` + literal(e.Type))
	}
	switch {
	case e.Disabled != nil && e.Enabled != nil && *e.Disabled == *e.Enabled:
		f.child("enabled").problem(fmt.Sprintf("contradicts disabled = %t; keep one of them", *e.Disabled))
	case e.Disabled != nil:
		u.Disabled = *e.Disabled
	case e.Enabled != nil:
		u.Disabled = !*e.Enabled
	}
	u.Prefix = defaultPrefix(u.Name)
	if e.Prefix != nil {
		if validPrefix(*e.Prefix) {
			u.Prefix = *e.Prefix
		} else {
			f.child("prefix").problem(`must be 1 to 16 of a-z, 0-9 and "-" (no "_": the first "__" of a name splits prefix from name), got ` + literal(*e.Prefix))
		}
	}
	switch {
	case e.RequestTimeout != nil && e.Timeout != nil:
		f.child("timeout").problem("is an alias of request_timeout; keep one of them")
	case e.RequestTimeout != nil:
		u.RequestTimeout = *e.RequestTimeout
	case e.Timeout != nil:
		u.RequestTimeout = e.Timeout.d
	}
	if u.Restart.InitialDelay > u.Restart.MaxDelay {
		f.child("restart").child("max_delay").problem(fmt.Sprintf("must not be shorter than restart.initial_delay (%s), got %s",
			quote(formatDuration(u.Restart.InitialDelay)), quote(formatDuration(u.Restart.MaxDelay))))
	}
}

// roots expands and resolves e's roots into file:// URIs.
func (e *serverEntry) roots(f field, r programRules) []string {
	x := &expander{env: r.env, base: r.base, field: "roots"}
	var out []string
	for _, root := range e.Roots {
		rest, isURI := strings.CutPrefix(root, "file://")
		if !isURI && strings.Contains(root, "://") {
			f.child("roots").problem("entries must be paths or file:// URIs, got " + quote(root))
			continue
		}
		v, problem := x.expand(rest, allowClientCwd)
		switch {
		case problem != "":
			f.child("roots").problem(problem)
		case isURI || strings.HasPrefix(v, ClientCwd):
			out = append(out, "file://"+v)
		default:
			out = append(out, "file://"+resolvePath(v, r.env["HOME"], r.base))
		}
	}
	return out
}

func (flt *Filter) decodeEntry(f field, raw any) {
	if list, ok := stringList(raw); ok {
		*flt = Filter{Include: list}
		checkGlobs(f, list)
		return
	}
	if _, ok := raw.(map[string]any); !ok {
		f.problem("must be a list of globs (include) or a table {include = [globs], exclude = [globs]}, got " + literal(raw))
		return
	}
	var t struct {
		Include []string `key:"include"`
		Exclude []string `key:"exclude"`
	}
	f.table(raw, &t)
	checkGlobs(f.child("include"), t.Include)
	checkGlobs(f.child("exclude"), t.Exclude)
	*flt = Filter{Include: t.Include, Exclude: t.Exclude}
}

func checkGlobs(f field, globs []string) {
	for _, g := range globs {
		if _, err := filepath.Match(g, ""); err != nil {
			f.problem("entries must be globs (*, ?, [a-z]), got " + quote(g))
		}
	}
}

// clientTimeout is timeout as clients write it: a number of seconds, or a
// duration.
type clientTimeout struct{ d time.Duration }

func (c *clientTimeout) decodeEntry(f field, raw any) {
	if _, text := raw.(string); !text {
		if n, ok := toInt(raw); ok && n > 0 {
			c.d = time.Duration(n) * time.Second
			return
		}
	}
	if d, ok := toDuration(raw); ok && d > 0 {
		c.d = d
		return
	}
	f.problem(`must be a positive number of seconds or a positive duration, such as "10m", got ` + literal(raw))
}

// ignoredKey is a key snodod accepts without using its value.
type ignoredKey struct{ given bool }

func (k *ignoredKey) decodeEntry(field, any) { k.given = true }
