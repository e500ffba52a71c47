package config

import (
	"maps"
	"slices"
	"strings"
)

// secretShown stands for every env value in `snodod config print`.
const secretShown = "<set>"

// printServers lists the entries' fields as written (before expansion, so
// a ${file:…} secret shows as its path), one key per field and per env
// variable, each env value shown as <set>.
func printServers(c *Config) []printEntry {
	var out []printEntry
	for _, u := range c.MCPServers {
		base := "mcpServers." + tomlKey(u.Name)
		src := u.Source.String()
		for _, f := range slices.Sorted(maps.Keys(u.written)) {
			v := u.written[f]
			if env, ok := v.(map[string]any); ok && f == "env" {
				for _, k := range slices.Sorted(maps.Keys(env)) {
					out = append(out, printEntry{key: base + ".env." + tomlKey(k), text: quote(secretShown), source: src, value: secretShown})
				}
				continue
			}
			out = append(out, printEntry{key: base + "." + tomlKey(f), text: literal(v), source: src, value: v})
		}
	}
	return out
}

// tomlKey quotes a key part that is not a bare TOML key.
func tomlKey(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return k
	}
	return quote(k)
}
