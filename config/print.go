package config

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Print writes the effective configuration as `snodod config print` shows
// it: one `key = value  # source` line per key, sorted by key, the comments
// aligned. Values are TOML (dotted keys, quoted strings and durations), so
// the output, comments and all, loads back as a configuration file.
func (c *Config) Print(w io.Writer) error {
	entries := c.entries()
	width := 0
	for _, e := range entries {
		width = max(width, len(e.key)+3+len(e.text))
	}
	width = min(width, 72)
	var b strings.Builder
	for _, e := range entries {
		line := e.key + " = " + e.text
		fmt.Fprintf(&b, "%-*s  # %s\n", width, line, e.source)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PrintJSON writes the effective configuration as `snodod config print
// --json` shows it: one object whose members are the keys, sorted, each
// {"value": …, "source": "…"}. Durations are strings ("30m"), lists are
// never null.
func (c *Config) PrintJSON(w io.Writer) error {
	type entry struct {
		Value  any    `json:"value"`
		Source string `json:"source"`
	}
	out := map[string]entry{}
	for _, e := range c.entries() {
		v := e.value
		if d, ok := v.(time.Duration); ok {
			v = formatDuration(d)
		}
		out[e.key] = entry{Value: v, Source: e.source}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

type printEntry struct {
	key, text, source string
	value             any
}

// entries reads every key's value from c by its field, sorted by key,
// then the entry sections' lines.
func (c *Config) entries() []printEntry {
	out := make([]printEntry, 0, len(specs))
	for _, s := range sortedSpecs() {
		v := fieldValue(c, s)
		out = append(out, printEntry{key: s.name, text: literal(v), source: c.Source(s.name).String(), value: v})
	}
	for _, name := range entrySectionNames() {
		if p := entrySections[name].print; p != nil {
			out = append(out, p(c)...)
			continue
		}
		src := Source{Kind: FromFile, Name: c.file}.String()
		table := c.written[name]
		for _, entry := range slices.Sorted(maps.Keys(table)) {
			fields, _ := table[entry].(map[string]any)
			out = append(out, printFields(name+"."+tomlKey(entry), fields, src)...)
		}
	}
	return out
}
