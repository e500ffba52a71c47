package config

import (
	"maps"
	"slices"
	"strings"
)

// secretShown stands for an env value that looks like a secret
// (SecretLooking) in `snodod config print`.
const secretShown = "<set>"

// printServers lists the entries' fields as written (before expansion, so
// a ${file:…} secret shows as its path and loads back), each from where it
// came (the file or an import).
func printServers(c *Config) []printEntry {
	var out []printEntry
	for _, u := range c.MCPServers {
		out = append(out, printFields("mcpServers."+tomlKey(u.Name), u.written, u.Source.String())...)
	}
	return out
}

// printFields lists one entry's fields as written under base, one key per
// field and per env variable, sorted, an env value that looks like a
// secret (a literal token, not a ${file:…} reference) shown as <set>: the
// entry sections' lines of `snodod config print` (mcpServers, tools,
// resources, prompts).
func printFields(base string, fields map[string]any, src string) []printEntry {
	var out []printEntry
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		v := fields[f]
		if env, ok := v.(map[string]any); ok && (f == "env" || f == "headers") {
			for _, k := range slices.Sorted(maps.Keys(env)) {
				s, isText := env[k].(string)
				if !isText || SecretLooking(k, s) {
					s = secretShown
				}
				out = append(out, printEntry{key: base + "." + f + "." + tomlKey(k), text: quote(s), source: src, value: s})
			}
			continue
		}
		if s, ok := v.(string); ok && (f == "url" || f == "serverUrl") {
			s = redactQuery(s)
			out = append(out, printEntry{key: base + "." + tomlKey(f), text: quote(s), source: src, value: s})
			continue
		}
		out = append(out, printEntry{key: base + "." + tomlKey(f), text: literal(v), source: src, value: v})
	}
	return out
}

// redactQuery shows a URL's query values that look like secrets (an API
// key, say) as <set>: a URL as written may carry one.
func redactQuery(s string) string {
	base, query, ok := strings.Cut(s, "?")
	if !ok {
		return s
	}
	parts := strings.Split(query, "&")
	for i, p := range parts {
		if name, value, ok := strings.Cut(p, "="); ok && SecretLooking(name, value) {
			parts[i] = name + "=" + secretShown
		}
	}
	return base + "?" + strings.Join(parts, "&")
}

// TOMLKey writes k as a TOML key part: bare when TOML allows it, else a
// basic string, as `snodod config print` writes keys.
func TOMLKey(k string) string { return tomlKey(k) }

// TOMLString writes s as a TOML basic string (control characters escaped,
// invalid UTF-8 replaced), as `snodod config print` writes values.
func TOMLString(s string) string { return quote(s) }

// tomlKey quotes a key part that is not a bare TOML key.
func tomlKey(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return k
	}
	return quote(k)
}
