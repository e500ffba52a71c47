package config

import (
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// imports reads the entries of every upstreams.import file, in order; an
// entry of an earlier file wins over a later one of the same name. An
// import is another program's file: nothing in it fails the whole
// configuration. A missing file, one that does not parse, and each entry
// snodod cannot host as written (its problems, a client's syntax it cannot
// map) are warnings, and what they concern is skipped. The entries named
// in own (snodod's own file's) are not read: they are shadowed.
func imports(d *entryDecoder, ctx entryContext, paths []string, own map[string]bool) []Upstream {
	var out []Upstream
	seen := maps.Clone(own)
	for _, p := range paths {
		for _, u := range importFile(d, ctx, p, seen) {
			seen[u.Name] = true
			out = append(out, u)
		}
	}
	return out
}

// importFile reads one client configuration file, but for the entries
// named in seen (taken already).
func importFile(d *entryDecoder, ctx entryContext, p string, seen map[string]bool) []Upstream {
	full := ctx.path(p)
	src := Source{Kind: FromFile, Name: full}
	f := field{d: d, key: "upstreams.import", src: src}
	cf, err := ReadClientFile(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.warn("names " + full + ", which does not exist; it is skipped")
		return nil
	case err != nil:
		f.warn("names a file that cannot be read as a client configuration, so it is skipped: " + err.Error())
		return nil
	}
	var out []Upstream
	for _, name := range slices.Sorted(maps.Keys(cf.Entries)) {
		if seen[name] {
			continue
		}
		u := Upstream{Name: name, Source: src, Imported: true}
		raw := cf.Entries[name]
		if fields, ok := raw.(map[string]any); ok {
			if IsSnododConnect(fields) {
				// What snodod import --write put in the client's file: the
				// client reaches snodod through it; snodod does not host
				// itself.
				continue
			}
			mapped, skip := MapClientEntry(fields)
			if skip == "" && MCPRemoteSecret(mapped) {
				skip = "passes a client secret on mcp-remote's command line (--static-oauth-client-info); snodod reads it from a file: move the entry into snodod's configuration with snodod import FILE"
			}
			if skip != "" {
				serverField(d, u, "").warn(skip + "; the entry is skipped")
				continue
			}
			raw = mapped
		}
		sub := &entryDecoder{}
		u, ok := decodeServer(sub, ctx, name, raw, src, true)
		skipped := sub.errors() > 0
		for _, p := range sub.problems {
			if !p.Warning {
				note := importNote(u)
				p.Message = strings.TrimSuffix(p.Message, note) + "; the entry is skipped" + note
				p.Warning = true
			}
			d.problems = append(d.problems, p)
		}
		if ok && !skipped {
			out = append(out, u)
		}
	}
	return out
}

// The variables of clients' files that MapClientEntry rewrites: VS Code's
// and Cursor's ${env:NAME}, ${workspaceFolder} and ${userHome}.
var clientVariables = map[string]string{
	"${workspaceFolder}": ClientCwd,
	"${userHome}":        "${HOME}",
	"${pathSeparator}":   "/",
	"${/}":               "/",
}

// MapClientEntry rewrites a client's server entry into snodod's syntax:
// an entry that runs mcp-remote becomes the url entry it stands for
// (mapMCPRemote); ${env:NAME} becomes ${NAME}, ${workspaceFolder}
// ${client.cwd} (the folder of the client the instance serves) and
// ${userHome} ${HOME}, in command, args, env, envFile, cwd, url and
// headers. skip, when not "", says why the
// entry cannot be hosted as it is written: it uses a client's variable
// snodod has no equivalent of, such as VS Code's ${input:ID}, which asks
// the user. fields is not modified.
func MapClientEntry(fields map[string]any) (mapped map[string]any, skip string) {
	if args, ok := mcpRemoteArgs(fields); ok {
		if fields, skip = mapMCPRemote(fields, args); skip != "" {
			return nil, skip
		}
	}
	mapped = maps.Clone(fields)
	text := func(s string) string {
		s = strings.ReplaceAll(s, "$$", "$$$$") // a client passes $$ as it is
		for from, to := range clientVariables {
			s = strings.ReplaceAll(s, from, to)
		}
		for {
			i := strings.Index(s, "${env:")
			end := strings.IndexByte(s[max(i, 0):], '}')
			if i < 0 || end < 0 {
				break
			}
			s = s[:i] + "${" + s[i+len("${env:"):i+end] + s[i+end:]
		}
		if i := strings.Index(s, "${input:"); i >= 0 && skip == "" {
			id, _, _ := strings.Cut(s[i+len("${input:"):], "}")
			skip = "uses ${input:" + id + "}, a value the client asks the user for; snodod cannot ask: put the value in a file, " +
				"and write the entry in snodod's own configuration with env = { NAME = \"${file:PATH}\" } (snodod import FILE does it)"
		}
		return s
	}
	for _, k := range []string{"command", "args", "env", "cwd", "envFile", "env_file", "url", "serverUrl", "headers", "tls_ca_file"} {
		if v, ok := mapped[k]; ok {
			mapped[k] = mapStrings(v, text)
		}
	}
	return mapped, skip
}

// mapStrings returns v with every string in it (in lists and tables, at
// any depth) replaced by f's; v is not modified.
func mapStrings(v any, f func(string) string) any {
	switch v := v.(type) {
	case string:
		return f(v)
	case []any:
		out := make([]any, len(v))
		for i, it := range v {
			out[i] = mapStrings(it, f)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, it := range v {
			out[k] = mapStrings(it, f)
		}
		return out
	}
	return v
}

// IsSnododConnect reports whether a client's server entry runs snodod
// connect: the entry `snodod import --write` puts in a client's file in
// place of the server it moved into snodod's configuration.
func IsSnododConnect(fields map[string]any) bool {
	command, _ := fields["command"].(string)
	args, _ := fields["args"].([]any)
	first, _ := firstOf(args).(string)
	return filepath.Base(command) == "snodod" && first == "connect"
}

func firstOf(list []any) any {
	if len(list) == 0 {
		return nil
	}
	return list[0]
}
