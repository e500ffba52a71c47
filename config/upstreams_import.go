package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// imports reads the entries of every upstreams.import file, in order; an
// entry of an earlier file wins over a later one of the same name.
func (d *serverDecoder) imports() []Upstream {
	var out []Upstream
	seen := map[string]bool{}
	for _, p := range d.c.Upstreams.Import {
		for _, u := range d.importFile(p) {
			if !seen[u.Name] {
				seen[u.Name] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// importFile reads one client configuration file. A missing file is a
// warning (an import list may name the files of several machines); one
// that does not parse is a problem.
func (d *serverDecoder) importFile(p string) []Upstream {
	full := entryPath(p, d.ctx)
	src := Source{Kind: FromFile, Name: full}
	table, err := ReadClientConfig(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.problems = append(d.problems, Problem{Key: "upstreams.import", Source: src, Warning: true,
			Message: "names " + full + ", which does not exist; it is skipped"})
		return nil
	case err != nil:
		d.problems = append(d.problems, Problem{Key: "upstreams.import", Source: src, Message: "names a file that cannot be read as a client configuration: " + err.Error()})
		return nil
	}
	return d.entries(table, src, true)
}

// ReadClientConfig reads the server entries of an MCP client's
// configuration file: the mcpServers table (Claude Desktop, Claude Code's
// .mcp.json, Cursor, Cline), else VS Code's servers table. The format is
// taken from the extension (.json when it has none). An error from reading
// matches fs.ErrNotExist for a missing file.
func ReadClientConfig(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ext := strings.ToLower(filepath.Ext(path))
	parser, ok := parsers[ext]
	if !ok {
		parser = parsers[".json"]
	}
	doc, err := parser.Unmarshal(b)
	if err != nil {
		return nil, parseError(path, b, err)
	}
	for _, key := range []string{"mcpServers", "servers"} {
		if v, ok := doc[key]; ok {
			table, ok := v.(map[string]any)
			if !ok {
				return nil, errors.New(key + " is not a table of entries")
			}
			return table, nil
		}
	}
	return map[string]any{}, nil
}
