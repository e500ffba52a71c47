package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// serverFields are the fields of an mcpServers entry, in the order of
// docs/upstreams.md §1, each with its decoder.
var serverFields = []string{
	"command", "args", "env", "inherit_env", "cwd", "disabled", "enabled", "prefix", "share",
	"max_instances", "start", "start_timeout", "request_timeout", "idle_timeout", "timeout",
	"protocol", "tools", "prompts", "resources", "roots", "restart", "ping_interval",
}

// ignoredClientKeys are keys MCP clients write that snodod accepts and
// ignores, reporting them once as a warning.
var ignoredClientKeys = []string{"type", "alwaysAllow", "autoApprove", "transportType", "watchPaths"}

// remoteKeys mark a remote server, which snodod cannot host yet.
var remoteKeys = []string{"url", "serverUrl"}

var restartFields = []string{"max_attempts", "initial_delay", "max_delay", "reset_after"}

var upstreamProtocols = []string{"auto", "2025-06-18", "2025-11-25", "2026-07-28"}

// entries decodes one table of entries (the file's mcpServers, or an
// imported file's), in name order.
func (d *serverDecoder) entries(table map[string]any, src Source, imported bool) []Upstream {
	var out []Upstream
	for _, name := range slices.Sorted(maps.Keys(table)) {
		u := Upstream{Name: name, Source: src, Imported: imported}
		if !validName(name) {
			d.problem(u, "", "must be named with 1 to 64 letters, digits, \".\", \"_\" or \"-\" (it is used on command lines: snodod connect NAME), got "+quote(name))
			continue
		}
		fields, ok := table[name].(map[string]any)
		if !ok {
			d.problem(u, "", "must be a table of fields (command, args, env, …), got "+literal(table[name]))
			continue
		}
		if d.remote(u, fields) {
			continue
		}
		if d.entry(&u, fields) {
			out = append(out, u)
		}
	}
	return out
}

// remote reports a remote server's entry: refused in snodod's own file,
// skipped with a warning in an imported one.
func (d *serverDecoder) remote(u Upstream, fields map[string]any) bool {
	key := RemoteKey(fields)
	if key == "" {
		return false
	}
	msg := "is a remote server (" + key + "); snodod hosts only local servers started with command and args for now"
	if u.Imported {
		d.warn(u, "", msg+"; the entry is skipped")
	} else {
		d.problem(u, key, msg+": remove the entry, or run the server locally with command and args")
	}
	return true
}

// RemoteKey returns the key that makes a client's server entry a remote
// server, which snodod cannot host yet: url, serverUrl, or a type other
// than "stdio"; "" for a local server.
func RemoteKey(fields map[string]any) string {
	key := ""
	for _, k := range remoteKeys {
		if _, ok := fields[k]; ok {
			key = k
		}
	}
	if t, _ := fields["type"].(string); key == "" && t != "" && t != "stdio" {
		key = "type"
	}
	return key
}

// entry decodes one entry's fields into u, reporting every problem; it
// returns false when any field is wrong.
func (d *serverDecoder) entry(u *Upstream, fields map[string]any) bool {
	before := d.errors()
	u.written = fields
	u.Share, u.Start, u.Protocol = DefaultShare, DefaultStart, DefaultProtocol
	u.MaxInstances = DefaultMaxInstances
	u.StartTimeout, u.RequestTimeout, u.IdleTimeout = DefaultStartTimeout, DefaultRequestTimeout, DefaultIdleTimeout
	u.PingInterval, u.Restart = DefaultPingInterval, DefaultRestart
	u.InheritEnv = InheritEnv{Names: DefaultInheritEnv}
	u.Prefix = defaultPrefix(u.Name)
	var ignored []string
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if slices.Contains(ignoredClientKeys, f) {
			ignored = append(ignored, f)
			continue
		}
		if !slices.Contains(serverFields, f) {
			d.problems = append(d.problems, Problem{Key: entryKey(u.Name, f), Source: u.Source, Unknown: true,
				Message: fmt.Sprintf("unknown key %q%s", entryKey(u.Name, f), importNote(*u)) +
					didYouMean(nearest(f, serverFields), func(s string) string { return strconv.Quote(entryKey(u.Name, s)) })})
		}
	}
	if len(ignored) > 0 {
		d.warn(*u, "", "ignored client keys "+join(ignored, "and")+": snodod does not use them")
	}
	x := &expander{ctx: d.ctx, d: d, u: u}
	d.command(u, fields, x)
	if v, ok := fields["args"]; ok {
		if list, ok := stringList(v); ok {
			u.Args = make([]string, len(list))
			for i, a := range list {
				u.Args[i] = x.expand("args", a)
			}
		} else {
			d.problem(*u, "args", "must be a list of strings, got "+literal(v))
		}
	}
	d.env(u, fields, x)
	d.inherit(u, fields)
	if v, ok := fields["cwd"]; ok {
		if s, ok := v.(string); ok && s != "" {
			u.Cwd = x.path("cwd", s)
		} else {
			d.problem(*u, "cwd", "must be a non-empty path, got "+literal(v))
		}
	}
	d.enabled(u, fields)
	if v, ok := fields["prefix"]; ok {
		if s, _ := v.(string); validPrefix(s) {
			u.Prefix = s
		} else {
			d.problem(*u, "prefix", "must be 1 to 16 of a-z, 0-9 and \"-\" (no \"_\": the first \"__\" of a name splits prefix from name), got "+literal(v))
		}
	}
	d.choice(u, fields, "share", &u.Share, "all", "cwd", "session")
	d.choice(u, fields, "start", &u.Start, "lazy", "eager", "manual")
	d.choice(u, fields, "protocol", &u.Protocol, upstreamProtocols...)
	if v, ok := fields["max_instances"]; ok {
		if n, ok := toInt(v); ok && n > 0 {
			u.MaxInstances = n
		} else {
			d.problem(*u, "max_instances", "must be a positive integer, got "+literal(v))
		}
	}
	d.duration(u, fields, "start_timeout", &u.StartTimeout, false)
	d.duration(u, fields, "idle_timeout", &u.IdleTimeout, true)
	d.duration(u, fields, "ping_interval", &u.PingInterval, true)
	d.requestTimeout(u, fields)
	d.filter(u, fields, "tools", &u.Tools)
	d.filter(u, fields, "prompts", &u.Prompts)
	d.filter(u, fields, "resources", &u.Resources)
	d.roots(u, fields, x)
	d.restart(u, fields)
	if d.errors() > before {
		return false
	}
	d.warnings(u)
	return true
}

func (d *serverDecoder) command(u *Upstream, fields map[string]any, x *expander) {
	v, ok := fields["command"]
	if !ok {
		d.problem(*u, "command", `must be set: the program to run, such as "npx"`)
		return
	}
	s, _ := v.(string)
	if strings.TrimSpace(s) == "" {
		d.problem(*u, "command", "must be a non-empty string, got "+literal(v))
		return
	}
	if _, hasArgs := fields["args"]; !hasArgs && strings.ContainsAny(strings.TrimSpace(s), " \t") {
		parts := strings.Fields(s)
		args := make([]string, len(parts)-1)
		for i, p := range parts[1:] {
			args[i] = quote(p)
		}
		d.problem(*u, "command", fmt.Sprintf("must be the program alone (it is never run through a shell), got %s; write command = %s and args = [%s]",
			quote(s), quote(parts[0]), strings.Join(args, ", ")))
		return
	}
	u.Command = x.expand("command", s)
}

func (d *serverDecoder) env(u *Upstream, fields map[string]any, x *expander) {
	v, ok := fields["env"]
	if !ok {
		return
	}
	table, ok := v.(map[string]any)
	if !ok {
		d.problem(*u, "env", "must be a table of variables, such as { TOKEN = \"${file:~/.secrets/token}\" }, got "+kindOfValue(v))
		return
	}
	u.Env = make(map[string]string, len(table))
	for _, k := range slices.Sorted(maps.Keys(table)) {
		field := "env." + k
		if k == "" || strings.ContainsAny(k, "=\x00") {
			d.problem(*u, field, "must be named without \"=\" or NUL")
			continue
		}
		s, ok := table[k].(string)
		if !ok {
			// The value is not shown: env holds secrets.
			d.problem(*u, field, "must be a string, got "+kindOfValue(table[k]))
			continue
		}
		u.Env[k] = x.expand(field, s)
	}
}

func (d *serverDecoder) inherit(u *Upstream, fields map[string]any) {
	v, ok := fields["inherit_env"]
	if !ok {
		return
	}
	if b, ok := v.(bool); ok {
		u.InheritEnv = InheritEnv{All: b, Names: []string{}}
		return
	}
	names, ok := stringList(v)
	if !ok {
		d.problem(*u, "inherit_env", "must be true (every variable), false (none) or a list of names (a trailing * matches a prefix), got "+literal(v))
		return
	}
	u.InheritEnv = InheritEnv{Names: names}
}

func (d *serverDecoder) enabled(u *Upstream, fields map[string]any) {
	dv, hasD := fields["disabled"]
	ev, hasE := fields["enabled"]
	disabled, okD := dv.(bool)
	enabled, okE := ev.(bool)
	if hasD && !okD {
		d.problem(*u, "disabled", "must be true or false, got "+literal(dv))
	}
	if hasE && !okE {
		d.problem(*u, "enabled", "must be true or false, got "+literal(ev))
	}
	switch {
	case hasD && hasE && okD && okE && disabled == enabled:
		d.problem(*u, "enabled", fmt.Sprintf("contradicts disabled = %t; keep one of them", disabled))
	case okD:
		u.Disabled = disabled
	case okE:
		u.Disabled = !enabled
	}
}

func (d *serverDecoder) choice(u *Upstream, fields map[string]any, field string, dst *string, values ...string) {
	v, ok := fields[field]
	if !ok {
		return
	}
	s, _ := toString(v)
	if !slices.Contains(values, s) {
		d.problem(*u, field, "must be "+join(values, "or")+", got "+literal(v))
		return
	}
	*dst = s
}

// duration decodes a duration field; zeroOK allows "0s" (never, off).
func (d *serverDecoder) duration(u *Upstream, fields map[string]any, field string, dst *time.Duration, zeroOK bool) {
	if v, ok := fields[field]; ok {
		d.durationAt(u, field, v, dst, zeroOK)
	}
}

// durationAt decodes the duration v of field into dst.
func (d *serverDecoder) durationAt(u *Upstream, field string, v any, dst *time.Duration, zeroOK bool) {
	if dur, ok := durationValue(v, zeroOK); ok {
		*dst = dur
		return
	}
	allowed := "must be a positive duration"
	if zeroOK {
		allowed = `must be a positive duration, or "0s" for never`
	}
	if unitless(v) {
		allowed += ` with a unit, such as "30s"`
	}
	d.problem(*u, field, allowed+", got "+literal(v))
}

func durationValue(v any, zeroOK bool) (time.Duration, bool) {
	dur, ok := toDuration(v)
	return dur, ok && (dur > 0 || zeroOK && dur == 0)
}

// requestTimeout reads request_timeout, or timeout, the clients' spelling
// in seconds.
func (d *serverDecoder) requestTimeout(u *Upstream, fields map[string]any) {
	_, hasR := fields["request_timeout"]
	t, hasT := fields["timeout"]
	switch {
	case hasR && hasT:
		d.problem(*u, "timeout", "is an alias of request_timeout; keep one of them")
	case hasR:
		d.duration(u, fields, "request_timeout", &u.RequestTimeout, false)
	case hasT:
		if n, ok := toInt(t); ok && n > 0 {
			u.RequestTimeout = time.Duration(n) * time.Second
		} else if dur, ok := durationValue(t, false); ok {
			u.RequestTimeout = dur
		} else {
			d.problem(*u, "timeout", `must be a positive number of seconds or a duration such as "10m", got `+literal(t))
		}
	}
}

func (d *serverDecoder) filter(u *Upstream, fields map[string]any, field string, dst *Filter) {
	v, ok := fields[field]
	if !ok {
		return
	}
	bad := func() {
		d.problem(*u, field, "must be a list of globs (include) or a table {include = [globs], exclude = [globs]}, got "+literal(v))
	}
	if list, ok := stringList(v); ok {
		dst.Include = list
		d.globs(u, field, list)
		return
	}
	table, ok := v.(map[string]any)
	if !ok {
		bad()
		return
	}
	for _, k := range slices.Sorted(maps.Keys(table)) {
		list, ok := stringList(table[k])
		switch {
		case k != "include" && k != "exclude":
			d.problems = append(d.problems, Problem{Key: entryKey(u.Name, field+"."+k), Source: u.Source, Unknown: true,
				Message: fmt.Sprintf("unknown key %q; a filter has include and exclude", entryKey(u.Name, field+"."+k))})
		case !ok:
			d.problem(*u, field+"."+k, "must be a list of globs, got "+literal(table[k]))
		case k == "include":
			dst.Include = list
			d.globs(u, field+".include", list)
		default:
			dst.Exclude = list
			d.globs(u, field+".exclude", list)
		}
	}
}

func (d *serverDecoder) globs(u *Upstream, field string, globs []string) {
	for _, g := range globs {
		if _, err := filepath.Match(g, ""); err != nil {
			d.problem(*u, field, "entries must be globs (*, ?, [a-z]), got "+quote(g))
		}
	}
}

func (d *serverDecoder) roots(u *Upstream, fields map[string]any, x *expander) {
	v, ok := fields["roots"]
	if !ok {
		return
	}
	list, ok := stringList(v)
	if !ok {
		d.problem(*u, "roots", "must be a list of paths or file:// URIs, got "+literal(v))
		return
	}
	for _, r := range list {
		if rest, ok := strings.CutPrefix(r, "file://"); ok {
			u.Roots = append(u.Roots, "file://"+x.expand("roots", rest))
			continue
		}
		if strings.Contains(r, "://") {
			d.problem(*u, "roots", "entries must be paths or file:// URIs, got "+quote(r))
			continue
		}
		u.Roots = append(u.Roots, "file://"+x.path("roots", r))
	}
}

func (d *serverDecoder) restart(u *Upstream, fields map[string]any) {
	v, ok := fields["restart"]
	if !ok {
		return
	}
	table, ok := v.(map[string]any)
	if !ok {
		d.problem(*u, "restart", "must be a table {max_attempts, initial_delay, max_delay, reset_after}, got "+literal(v))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(table)) {
		field := "restart." + k
		val := table[k]
		switch k {
		case "max_attempts":
			if n, ok := toInt(val); ok && n > 0 {
				u.Restart.MaxAttempts = n
			} else {
				d.problem(*u, field, "must be a positive integer, got "+literal(val))
			}
		case "initial_delay", "max_delay", "reset_after":
			dst := map[string]*time.Duration{"initial_delay": &u.Restart.InitialDelay, "max_delay": &u.Restart.MaxDelay, "reset_after": &u.Restart.ResetAfter}[k]
			d.durationAt(u, field, val, dst, false)
		default:
			d.problems = append(d.problems, Problem{Key: entryKey(u.Name, field), Source: u.Source, Unknown: true,
				Message: fmt.Sprintf("unknown key %q", entryKey(u.Name, field)) +
					didYouMean(nearest(k, restartFields), func(s string) string { return strconv.Quote(entryKey(u.Name, "restart."+s)) })})
		}
	}
	if u.Restart.InitialDelay > u.Restart.MaxDelay {
		d.problem(*u, "restart.max_delay", fmt.Sprintf("must not be shorter than restart.initial_delay (%s), got %s",
			quote(formatDuration(u.Restart.InitialDelay)), quote(formatDuration(u.Restart.MaxDelay))))
	}
}

// stringList reads a list of strings. Unlike a keyed list, an entry's is
// never text: args = "one" is a mistake, not a list of one.
func stringList(v any) ([]string, bool) {
	if _, text := v.(string); text {
		return nil, false
	}
	list, ok := convert(kindStrings, v)
	if !ok {
		return nil, false
	}
	return list.([]string), true
}

// kindOfValue names a value's type without showing it (for secrets).
func kindOfValue(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a table"
	case []any:
		return "a list"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case nil:
		return "null"
	}
	return "a number"
}
