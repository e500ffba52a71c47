package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ClientFile is an MCP client's configuration file, read for its server
// entries: Claude Desktop's claude_desktop_config.json, Claude Code's
// .mcp.json, Cursor's and VS Code's mcp.json, Windsurf's mcp_config.json,
// Cline's cline_mcp_settings.json, or VS Code's settings.json.
type ClientFile struct {
	// Path is the file's path, as given.
	Path string
	// Key is where the entries are: ["mcpServers"] (Claude, Cursor,
	// Windsurf, Cline), ["servers"] (VS Code's mcp.json) or ["mcp",
	// "servers"] (VS Code's settings.json); nil when the file has none.
	Key []string
	// Entries are the server entries by name, as the file writes them.
	Entries map[string]any
	// Inputs are VS Code's inputs (the values it asks the user for), by
	// id: each one's description.
	Inputs map[string]string
	// Data is the file as read; JSON may have comments and trailing
	// commas (JSONC, as VS Code writes it).
	Data []byte
}

// VSCode reports whether f is in VS Code's shape (servers, with a type
// per entry) rather than the mcpServers one of the other clients.
func (f *ClientFile) VSCode() bool { return len(f.Key) > 0 && f.Key[len(f.Key)-1] == "servers" }

// ReadClientFile reads a client's configuration file. The format is taken
// from the extension (JSON, with comments allowed, when it has none). An
// error from reading matches fs.ErrNotExist for a missing file; a file
// that does not parse gives a *FileError.
func ReadClientFile(path string) (*ClientFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ext := strings.ToLower(filepath.Ext(path))
	parser, ok := parsers[ext]
	text := b
	if !ok || ext == ".json" {
		parser, text = parsers[".json"], StripJSONComments(b)
	}
	doc, err := parser.Unmarshal(text)
	if err != nil {
		return nil, parseError(path, text, err)
	}
	f := &ClientFile{Path: path, Data: b, Entries: map[string]any{}}
	table := doc
	if mcp, ok := doc["mcp"].(map[string]any); ok && doc["mcpServers"] == nil && doc["servers"] == nil {
		table, f.Key = mcp, []string{"mcp"} // VS Code's settings.json
	}
	for _, key := range []string{"mcpServers", "servers"} {
		v, ok := table[key]
		if !ok {
			continue
		}
		entries, ok := v.(map[string]any)
		if !ok {
			return nil, errors.New(strings.Join(append(f.Key, key), ".") + " is not a table of entries")
		}
		f.Key, f.Entries = append(f.Key, key), entries
		break
	}
	if len(f.Key) == 0 || f.Key[len(f.Key)-1] != "mcpServers" && f.Key[len(f.Key)-1] != "servers" {
		f.Key = nil
	}
	if inputs, ok := table["inputs"].([]any); ok {
		f.Inputs = map[string]string{}
		for _, in := range inputs {
			if m, ok := in.(map[string]any); ok {
				if id, ok := m["id"].(string); ok {
					desc, _ := m["description"].(string)
					f.Inputs[id] = desc
				}
			}
		}
	}
	return f, nil
}

// StripJSONComments returns b with the comments of JSONC (// to the end
// of the line, /* … */) and the commas before a closing } or ] replaced
// by spaces, so that encoding/json reads it and its offsets still point
// into b. Strings are kept as they are.
func StripJSONComments(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	blank := func(i, j int) {
		for k := i; k < j; k++ {
			if out[k] != '\n' {
				out[k] = ' '
			}
		}
	}
	comma := -1 // a comma that a closing bracket would make trailing
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '"':
			comma = -1
			for i++; i < len(out) && out[i] != '"'; i++ {
				if out[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			j := i
			for j < len(out) && out[j] != '\n' {
				j++
			}
			blank(i, j)
			i = j - 1
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			j := i + 2
			for j+1 < len(out) && !(out[j] == '*' && out[j+1] == '/') {
				j++
			}
			j = min(j+2, len(out))
			blank(i, j)
			i = j - 1
		case c == ',':
			comma = i
		case c == '}' || c == ']':
			if comma >= 0 {
				out[comma] = ' '
			}
			comma = -1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			comma = -1
		}
	}
	return out
}

// clientFiles are the names of MCP clients' configuration files, and whose.
var clientFiles = map[string]string{
	"claude_desktop_config.json": "Claude Desktop's",
	".mcp.json":                  "Claude Code's",
	"mcp.json":                   "an MCP client's (Cursor's or VS Code's)",
	"mcp_config.json":            "Windsurf's",
	"cline_mcp_settings.json":    "Cline's",
	"settings.json":              "VS Code's",
}

// clientFileHint says that the configuration file path, parsed as doc,
// looks like an MCP client's own, and what to do with it: a file named as
// a client names its file and holding servers, or one with the keys only
// clients write (VS Code's servers, inputs and mcp). "" when it does not.
func clientFileHint(path string, doc map[string]any) string {
	who, named := clientFiles[filepath.Base(path)]
	_, mcpServers := doc["mcpServers"]
	vscode := false
	for _, k := range []string{"servers", "inputs", "mcp"} {
		if _, ok := doc[k]; ok {
			vscode = true
		}
	}
	switch {
	case vscode && !named:
		who = "VS Code's"
	case !named || !mcpServers && !vscode:
		return ""
	}
	return path + " looks like " + who + " configuration, not snodod's: to host its servers, name it in snodod's own file " +
		"(upstreams.import = [" + quote(path) + "]), or copy them into it with snodod import " + path
}
