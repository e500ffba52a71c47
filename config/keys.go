package config

import (
	_ "embed"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	toml "github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/snodod/snodod/limits"
)

// defaultsTOML is the single source of every key's default.
//
//go:embed defaults.toml
var defaultsTOML []byte

// Key describes one configuration key, for docs/config.md, `snodod config
// print` and tools.
type Key struct {
	// Name is the key: section.leaf, e.g. "session.write_timeout".
	Name string
	// Type is "duration", "integer", "string", "boolean", "list of
	// strings" or "list of integers".
	Type string
	// Default is the default as a TOML value, e.g. `"5s"`, `2000000`, `[]`,
	// before any expansion.
	Default string
	// Env is the environment variable that sets the key, e.g.
	// SNODOD_SESSION__WRITE_TIMEOUT.
	Env string
	// Description is one line saying what the key does.
	Description string
	// Allowed is what the key accepts, as validation messages say it, e.g.
	// "must be a positive duration".
	Allowed string
	// Flag is the command-line flag that sets the key, without dashes
	// ("write-timeout"); "" when there is none.
	Flag string
	// DaemonOnly is true for a key only `snodod serve` applies; the flags
	// of `snodod stdio` leave it out.
	DaemonOnly bool
}

// Keys returns every configuration key in reference order (by section, as
// in docs/config.md). The slice is new on every call.
func Keys() []Key {
	defs := defaults()
	out := make([]Key, 0, len(specs))
	for _, s := range specs {
		out = append(out, Key{
			Name:        s.name,
			Type:        s.kind.String(),
			Default:     literal(defs.values[s.name]),
			Env:         envName(s.name),
			Description: s.desc,
			Allowed:     s.allowed,
			Flag:        s.flag,
			DaemonOnly:  s.daemonOnly,
		})
	}
	return out
}

// kind is the Go type of a key's value, taken from its Config field.
type kind int

const (
	kindDuration kind = iota + 1 // time.Duration
	kindInt                      // int
	kindString                   // string
	kindStrings                  // []string
	kindInts                     // []int
	kindBool                     // bool
)

func (k kind) String() string {
	switch k {
	case kindDuration:
		return "duration"
	case kindInt:
		return "integer"
	case kindString:
		return "string"
	case kindStrings:
		return "list of strings"
	case kindInts:
		return "list of integers"
	case kindBool:
		return "boolean"
	}
	return "invalid"
}

// spec is one key: its name and description, its rule, and (bound at init
// from Config's koanf tags) its kind and field.
type spec struct {
	name string
	desc string
	rule
	kind  kind
	field []int // reflect index path of the field in Config
	// flag is the command-line flag that sets the key ("" for none);
	// daemonOnly leaves it out of `snodod stdio`'s flags.
	flag       string
	daemonOnly bool
	// limit is true for a key of limits.All: its default is the limit's,
	// not defaults.toml's.
	limit bool
}

// keyed lists the keys that are not limits, in reference order within
// their section. Adding a key means a Config field with a koanf tag, a line
// here, a default in defaults.toml and a row in docs/config.md; init and the
// tests refuse any of them alone. A limit is added to package limits
// instead: init makes its spec, and its default is limits.All's.
var keyed = []*spec{
	{name: "daemon.socket", flag: "socket", daemonOnly: true, rule: socketPath("must be an absolute path of at most 107 bytes"), desc: "Session socket: every connection is a session. ${VAR} and ${VAR:-default} are expanded."},
	{name: "daemon.control_socket", flag: "control-socket", daemonOnly: true, rule: socketPath("must be empty or an absolute path of at most 107 bytes"), desc: "Control socket (fd hand-over, status); empty: control.sock beside daemon.socket."},
	{name: "daemon.allowed_uids", rule: eachInt("entries must be user ids from 0 to 4294967294", validUID), desc: "Peer uids accepted besides the daemon's own."},
	{name: "protocol.versions", rule: versionsRule(), desc: "Enabled MCP versions, in any order; empty means all three."},
	{name: "server.name", rule: scalar("must be a non-empty string", func(v any) bool { return v != "" }), desc: "serverInfo.name."},
	{name: "server.version", rule: anyString(), desc: "serverInfo.version; empty: the build version."},
	{name: "server.title", rule: anyString(), desc: "serverInfo.title; empty: none."},
	{name: "server.description", rule: anyString(), desc: "serverInfo.description; empty: none."},
	{name: "server.website_url", rule: scalar("must be empty or an http or https URL", validWebsite), desc: "serverInfo.websiteUrl; empty: none."},
	{name: "server.instructions", rule: anyString(), desc: "Instructions sent by initialize and server/discover; empty: none."},
	{name: "server.cache_ttl", rule: scalar("must be a non-negative duration", func(v any) bool { return v.(time.Duration) >= 0 }), desc: "ttlMs of cacheable 2026 results, sent as whole milliseconds."},
	{name: "server.demo", flag: "demo", rule: anyBool(), desc: "Also serve the demo tools (echo, sleep, big, fail, panic) and the conformance fixture."},
	{name: "server.cache_scope", rule: oneOf("public", "private"), desc: "cacheScope of cacheable 2026 results."},
	{name: "server.state_key_file", rule: anyString(), desc: "File holding the key (at least 32 bytes) that signs MRTR requestState and cursors; the same file on every node of a cluster. Empty: a random key per process."},
	{name: "http.listen", flag: "http", daemonOnly: true, rule: scalar(`must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes`, validListen), desc: "Streamable HTTP listener address; empty: off; a host-less :port binds 127.0.0.1; unix:PATH listens on a Unix socket of mode 0600 (${VAR} and ${VAR:-default} are expanded)."},
	{name: "http.path", rule: scalar("must start with / and contain no ?, # or spaces", validHTTPPath), desc: "The HTTP endpoint's path."},
	{name: "http.max_body_bytes", rule: positiveInt(), desc: "Largest HTTP request body accepted, in bytes."},
	{name: "http.allowed_origins", rule: eachString("entries must be origins (scheme://host[:port])", validOrigin), desc: "Origins allowed besides the loopback ones."},
	{name: "http.max_subscriptions", rule: positiveInt(), desc: "SSE listen streams the HTTP listener holds at once."},
	{name: "http.session_idle_timeout", rule: positiveDuration(), desc: "A legacy HTTP session ends after this long without requests or streams."},
	{name: "http.max_sessions", rule: positiveInt(), desc: "Legacy HTTP sessions alive at once; an initialize beyond it gets 503."},
	{name: "http.max_sessions_per_peer", rule: positiveInt(), desc: "Legacy HTTP sessions one client may hold: a local user by uid, others by address (behind a proxy, every client is the proxy's); an initialize beyond it gets 503."},
	{name: "http.allowed_hosts", rule: eachString("entries must be host names, optionally with :port", validHostEntry), desc: "Host header values accepted besides the loopback names (behind a proxy); when set, every request's Host is checked."},
	{name: "http.auth_token_file", rule: anyString(), desc: "File holding the bearer token HTTP clients send (Authorization: Bearer): every client on a network address; on loopback or unix: only users other than the daemon's and daemon.allowed_uids. Empty: none."},
	{name: "http.tokens", rule: eachString("entries must be file paths", func(s string) bool { return s != "" }), desc: "Files each holding a bearer token and the views it opens (token = \"…\", views = [\"NAME\"]): the token opens those views at http.path/@NAME and nothing else (docs/views.md)."},
	{name: "http.allow_unauthenticated", rule: anyBool(), desc: "Serve without a token every client the token would be asked of: anyone on a non-loopback http.listen, every local user on loopback (only behind something that authenticates; config check warns)."},
	{name: "http.node_id", rule: scalar("must be empty or 1 to 32 letters, digits, - or _", validNodeID), desc: "Tag of this node in legacy session ids (NODE.<hex>), for routing behind a load balancer; empty: none."},
	{name: "http.read_timeout", rule: positiveDuration(), desc: "How long a request's headers, and then its body, may take to arrive."},
	{name: "http.idle_timeout", rule: positiveDuration(), desc: "A keep-alive connection idle this long between requests is closed."},
	{name: "http.max_header_bytes", rule: positiveInt(), desc: "Largest request header block accepted, in bytes; more gets 431."},
	{name: "admin.listen", flag: "admin", daemonOnly: true, rule: scalar(`must be empty, a loopback host:port (such as "127.0.0.1:9464" or ":9464"), or unix: and an absolute path of at most 107 bytes`, validListen), desc: "Admin listener address (/metrics); empty: off; a host-less :port binds 127.0.0.1; unix:PATH listens on a Unix socket of mode 0600 (${VAR} and ${VAR:-default} are expanded); never a non-loopback address."},
	{name: "admin.auth_token_file", rule: anyString(), desc: "File holding the bearer token the admin listener asks of local users other than the daemon's and daemon.allowed_uids (Authorization: Bearer). Empty: none; only those users are served."},
	{name: "admin.native_histograms", rule: anyBool(), desc: "Give the latency histograms native buckets (factor 1.1) beside the classic ones, for a Prometheus that scrapes them; false keeps only the classic buckets, which cost less per request."},
	{name: "admin.max_viewers", rule: positiveInt(), desc: "Status page live streams (/events) open at once; one more gets 503."},
	{name: "admin.viewer_write_timeout", rule: positiveDuration(), desc: "How long one status page update may take to reach a viewer; a slower viewer is dropped."},
	{name: "audit.file", daemonOnly: true, rule: anyString(), desc: "File the audit log is appended to, one JSON line per tool call, resource read and prompt get (mode 0600; ${VAR} and ${VAR:-default} are expanded); empty: no file."},
	{name: "audit.max_size", rule: positiveInt(), desc: "Size in bytes at which the audit file is rotated (FILE.1, FILE.2, …): a line that would take it past this goes to a new file."},
	{name: "audit.max_files", rule: positiveInt(), desc: "Rotated audit files kept besides the one written; the oldest beyond it is removed."},
	{name: "audit.journald", rule: anyBool(), desc: "Send the audit lines to the systemd journal (SYSLOG_IDENTIFIER=snodod-audit) instead of a file; only one of audit.file and audit.journald."},
	{name: "audit.arguments", rule: anyBool(), desc: "Record each request's arguments beside their digest, with config secrets' values and secret-looking keys redacted; false records only the digest."},
	{name: "upstreams.import", rule: eachString("entries must be file paths", func(s string) bool { return s != "" }), desc: "Client configuration files whose mcpServers are hosted too; snodod's own entries win."},
	{name: "upstreams.max_children", rule: positiveInt(), desc: "Upstream processes running at once, all upstreams together; a start beyond it gets -31002."},
	{name: "upstreams.max_in_flight", rule: positiveInt(), desc: "Requests one upstream instance has in flight; more wait in its queue."},
	{name: "upstreams.max_queued", rule: positiveInt(), desc: "Requests waiting for one instance, served round-robin by session; beyond it -31003."},
	{name: "upstreams.max_parked", rule: positiveInt(), desc: "Calls of 2026 clients parked on a legacy upstream's elicitation or sampling, daemon-wide."},
	{name: "upstreams.max_server_requests", rule: positiveInt(), desc: "Requests from hosted servers (sampling, elicitation, roots, ping) waiting at once for one session's client, and held unanswered by one instance; beyond it -32603 to the server at once."},
	{name: "upstreams.stderr_bytes", rule: positiveInt(), desc: "Stderr kept per upstream, in bytes, for snodod logs and error messages."},
	{name: "upstreams.stderr_total_bytes", rule: positiveInt(), desc: "Stderr kept by all upstreams together, in bytes."},
	{name: "upstreams.drain_timeout", rule: positiveDuration(), desc: "How long a replaced or removed upstream instance may finish its requests after a reload."},
	{name: "upstreams.list_wait", rule: positiveDuration(), desc: "How long a list waits for a never-listed upstream that is starting (from the start of its start); then it answers without it, and list_changed follows."},
	{name: "upstreams.pin", rule: anyBool(), desc: "Pin the tool definitions of every hosted server whose entry sets no pin: a tool whose definition changes after it was first listed is held out of every view until snodod approve NAME TOOL."},
	{name: "upstreams.max_tools", rule: scalar("must be 0 or an integer of at least 3 (search_tools, call_tool and one more)", func(v any) bool { return v.(int) == 0 || v.(int) >= 3 }), desc: "Tool budget of the aggregated view (docs/views.md, Budgets): over it, tools/list shows the most used tools, upstreams.always and search_tools and call_tool; 0: the connected client's known limit (none for a client not in the table)."},
	{name: "upstreams.always", rule: eachString("entries must be tool names or globs, as the aggregated view names them", func(s string) bool { _, err := path.Match(s, ""); return s != "" && err == nil }), desc: "Tools the aggregated view lists even over its budget (names as the view shows them, globs allowed)."},
	{name: "log.level", flag: "log-level", rule: oneOf("debug", "info", "warn", "error"), desc: "Lowest level logged."},
	{name: "log.format", rule: oneOf("text", "json"), desc: "Log line format."},
}

// specs lists every key, limits and keyed ones, in reference order: by
// section, in the order sections first appear in limits.All and then in
// keyed, limits last within a section. Filled by init.
var specs []*spec

// specByName indexes specs; filled by init.
var specByName = map[string]*spec{}

// sections holds the section names ("session", …); filled by init.
var sections = map[string]bool{}

// init binds every keyed spec to its Config field by koanf tag, makes the
// limits' specs from limits.All, bound to their fields of Config.Limits, and
// orders them all. It panics when a field has no spec or a spec no field:
// both are programming errors that every test run catches.
func init() {
	fields := map[string][]int{}
	kinds := map[string]kind{}
	t := reflect.TypeFor[Config]()
	limitsIndex := -1
	for i := range t.NumField() {
		sec := t.Field(i)
		if sec.Type == reflect.TypeFor[limits.Limits]() {
			limitsIndex = i
			continue
		}
		secName := sec.Tag.Get("koanf")
		if secName == "" {
			continue
		}
		sections[secName] = true
		for j := range sec.Type.NumField() {
			f := sec.Type.Field(j)
			name := secName + "." + f.Tag.Get("koanf")
			fields[name] = []int{i, j}
			kinds[name] = kindOf(f.Type)
		}
	}
	for _, s := range keyed {
		idx, ok := fields[s.name]
		if !ok {
			panic(fmt.Sprintf("config: key %s has no Config field", s.name))
		}
		s.field, s.kind = idx, kinds[s.name]
		delete(fields, s.name)
	}
	for name := range fields {
		panic(fmt.Sprintf("config: Config field for %s has no entry in keyed", name))
	}
	specs = orderSpecs(limitSpecs(limitsIndex), keyed)
	for _, s := range specs {
		if specByName[s.name] != nil {
			panic("config: key " + s.name + " defined twice")
		}
		specByName[s.name] = s
		section, _, _ := strings.Cut(s.name, ".")
		sections[section] = true
	}
}

// limitSpecs makes a spec of every limit, bound to its field of the
// Config field at index i, which holds the limits.Limits.
func limitSpecs(i int) []*spec {
	if i < 0 {
		panic("config: Config has no limits.Limits field")
	}
	var ls limits.Limits
	lv := reflect.ValueOf(&ls).Elem()
	var out []*spec
	for _, l := range limits.All() {
		j := slices.IndexFunc(reflect.VisibleFields(lv.Type()), func(f reflect.StructField) bool {
			return lv.FieldByIndex(f.Index).Addr().Interface() == l.Field(&ls)
		})
		if j < 0 {
			panic("config: limit " + l.Key + " has no field in limits.Limits")
		}
		s := &spec{name: l.Key, desc: l.Description, field: []int{i, j}, limit: true, flag: l.Flag, daemonOnly: l.Daemon}
		if l.IsDuration() {
			s.kind, s.rule = kindDuration, positiveDuration()
		} else {
			s.kind, s.rule = kindInt, positiveInt()
		}
		if s.allowed != l.Allowed() {
			panic("config: limit " + l.Key + ": the rule's text differs from limits' Allowed")
		}
		out = append(out, s)
	}
	return out
}

// orderSpecs returns lims and keys in reference order: sections in the
// order they first appear in lims, then keys; within a section the keyed
// specs first, then the limits, each in their own order.
func orderSpecs(lims, keys []*spec) []*spec {
	rank := map[string]int{}
	all := slices.Concat(lims, keys)
	for _, s := range all {
		section, _, _ := strings.Cut(s.name, ".")
		if _, ok := rank[section]; !ok {
			rank[section] = len(rank)
		}
	}
	out := slices.Concat(keys, lims)
	slices.SortStableFunc(out, func(a, b *spec) int {
		sa, _, _ := strings.Cut(a.name, ".")
		sb, _, _ := strings.Cut(b.name, ".")
		return rank[sa] - rank[sb]
	})
	return out
}

func kindOf(t reflect.Type) kind {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return kindDuration
	case t.Kind() == reflect.Int:
		return kindInt
	case t.Kind() == reflect.String:
		return kindString
	case t == reflect.TypeFor[[]string]():
		return kindStrings
	case t == reflect.TypeFor[[]int]():
		return kindInts
	case t.Kind() == reflect.Bool:
		return kindBool
	}
	panic(fmt.Sprintf("config: unsupported field type %s", t))
}

// DefaultEnvPrefix starts every configuration variable, unless
// Options.EnvPrefix names another (a program embedding the daemon may want
// its own).
const DefaultEnvPrefix = "SNODOD_"

// envName is the variable that sets key: session.write_timeout →
// SNODOD_SESSION__WRITE_TIMEOUT (a double underscore between section and
// leaf, because leaves contain single underscores).
func envName(key string) string { return envNameWith(DefaultEnvPrefix, key) }

func envNameWith(prefix, key string) string {
	section, leaf, _ := strings.Cut(key, ".")
	return prefix + strings.ToUpper(section) + "__" + strings.ToUpper(leaf)
}

// defaultSet is the parsed embedded defaults.
type defaultSet struct {
	raw    map[string]any // as parsed, for the default layer
	values map[string]any // converted to each key's kind, for Keys
}

// defaults parses defaults.toml once and adds the limits' defaults. It
// panics when the file does not define exactly the keyed keys, each
// convertible: the file is part of the binary, so that is a programming
// error.
var defaults = sync.OnceValue(func() defaultSet {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(defaultsTOML), toml.Parser()); err != nil {
		panic("config: defaults.toml: " + err.Error())
	}
	set := defaultSet{raw: map[string]any{}, values: map[string]any{}}
	for _, l := range limits.All() {
		set.raw[l.Key], set.values[l.Key] = l.Default, l.Default
	}
	for _, key := range k.Keys() {
		s, ok := specByName[key]
		if !ok {
			panic("config: defaults.toml sets unknown key " + key)
		}
		if s.limit {
			panic("config: defaults.toml sets " + key + ", a limit: its default is in package limits")
		}
		raw := k.Get(key)
		v, ok := convert(s.kind, raw)
		if !ok {
			panic(fmt.Sprintf("config: defaults.toml: %s: %s, got %s", key, s.allowed, literal(raw)))
		}
		set.raw[key], set.values[key] = raw, v
	}
	for _, s := range specs {
		if _, ok := set.raw[s.name]; !ok {
			panic("config: defaults.toml lacks key " + s.name)
		}
	}
	return set
})

// sortedSpecs returns specs sorted by key name.
func sortedSpecs() []*spec {
	out := slices.Clone(specs)
	slices.SortFunc(out, func(a, b *spec) int { return strings.Compare(a.name, b.name) })
	return out
}

// fieldValue reads s's field from c; a nil list reads as empty.
func fieldValue(c *Config, s *spec) any {
	v := reflect.ValueOf(c).Elem().FieldByIndex(s.field)
	if v.Kind() == reflect.Slice && v.IsNil() {
		return reflect.MakeSlice(v.Type(), 0, 0).Interface()
	}
	return v.Interface()
}
