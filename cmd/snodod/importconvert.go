package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/snodod/snodod/config"
)

// This file turns a client's server entries into snodod configuration
// (docs/config.md, "Hosted servers"): each entry's TOML, its secrets in
// files of their own, and what was left out and why.

// imported is one client entry turned into snodod configuration.
type imported struct {
	name string
	// toml is the [mcpServers.NAME] table; empty when the entry is
	// skipped.
	toml string
	// skipped says why the entry is not imported ("uses ${input:…} in
	// args"); such an entry stays in the client's file as it is.
	skipped string
}

// secret is a value `snodod import` keeps in a file of its own.
type secret struct {
	path string // as the configuration writes it: ~/… or absolute
	from string // what it holds: "env.TOKEN", or a VS Code input
	// empty is set for a file to fill in: a value the client asks the
	// user for (VS Code's ${input:ID}), which snodod cannot know.
	empty bool
}

// importer converts the entries of one client file.
type importer struct {
	file *config.ClientFile
	// secrets is the directory secret values are written to; home is
	// $HOME, for writing the paths under it as ~/….
	secrets, home string
	// written lists the secret files, in the order written; created the
	// ones this run made, removed again when a --write is refused.
	written []secret
	created []string
}

// convert turns every entry of the file, in name order.
func (im *importer) convert() ([]imported, error) {
	var out []imported
	for _, name := range slices.Sorted(maps.Keys(im.file.Entries)) {
		e, err := im.entry(name, im.file.Entries[name])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// entry turns one client entry: a server the client starts, a remote one
// (url, serverUrl), or one that runs mcp-remote (turned into the url
// entry it stands for by config.MapClientEntry).
func (im *importer) entry(name string, raw any) (imported, error) {
	e := imported{name: name}
	fields, ok := raw.(map[string]any)
	switch {
	case !ok:
		e.skipped = "not a table of fields"
		return e, nil
	case config.IsSnododConnect(fields):
		e.skipped = "snodod connect already: the client uses snodod for it"
		return e, nil
	}
	fields, err := im.inputs(name, fields)
	if err != nil {
		return e, err
	}
	mapped, skip := config.MapClientEntry(fields)
	if skip != "" {
		e.skipped = skip
		return e, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[mcpServers.%s]\n", config.TOMLKey(name))
	var comments []string
	for _, k := range importOrder(mapped) {
		v := mapped[k]
		switch k {
		case "command":
			b.WriteString("command = " + tomlValue(v) + "\n")
		case "args":
			list, _ := v.([]any)
			args := make([]any, len(list))
			for i, a := range list {
				if _, text := a.(string); text {
					args[i] = a
				} else {
					args[i] = fmt.Sprint(a) // a number: its text, as a client passes it
				}
			}
			b.WriteString("args = " + tomlValue(args) + "\n")
		case "cwd", "disabled", "enabled":
			b.WriteString(k + " = " + tomlValue(v) + "\n")
		case "envFile", "env_file":
			b.WriteString("env_file = " + tomlValue(v) + "\n")
		case "env":
			env, err := im.env(name, v)
			if err != nil {
				return e, err
			}
			b.WriteString(env)
		case "timeout":
			if n, ok := v.(float64); ok && n > 0 && n == float64(int64(n)) {
				b.WriteString("request_timeout = " + config.TOMLString(strconv.FormatInt(int64(n), 10)+"s") + "\n")
			} else {
				b.WriteString("request_timeout = " + tomlValue(v) + "\n")
			}
		case "type":
			if !slices.Contains([]any{"stdio", "http", "streamable-http", "streamableHttp"}, v) {
				b.WriteString("type = " + tomlValue(v) + "\n")
			}
		case "url", "serverUrl":
			b.WriteString("url = " + tomlValue(v) + "\n")
		case "headers":
			headers, err := im.headers(name, v)
			if err != nil {
				return e, err
			}
			b.WriteString(headers)
		case "oauth":
			oauth, err := im.oauth(name, v)
			if err != nil {
				return e, err
			}
			b.WriteString(oauth)
		case "allow_insecure_http", "tls_ca_file", "tools":
			b.WriteString(k + " = " + tomlValue(v) + "\n")
		default:
			comments = append(comments, "# "+k+": a client key snodod does not use")
		}
	}
	if usesClientCwd(mapped) {
		// ${workspaceFolder}: one instance per folder, as the client runs it.
		b.WriteString(`share = "cwd"` + "\n")
	}
	for _, c := range comments {
		b.WriteString(c + "\n")
	}
	e.toml = b.String()
	return e, nil
}

// importOrder lists an entry's keys in the order snodod's tables write
// them: the program first, then the rest sorted.
func importOrder(fields map[string]any) []string {
	first := []string{"command", "args", "env", "envFile", "env_file", "cwd", "url", "serverUrl", "type", "headers"}
	var out []string
	for _, k := range first {
		if _, ok := fields[k]; ok {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(first, k) {
			out = append(out, k)
		}
	}
	return out
}

// env writes an entry's env: each value as it is, unless it looks like a
// secret (config.SecretLooking), which goes to a file of its own and is
// read with ${file:…}. The value is never printed.
func (im *importer) env(entry string, v any) (string, error) {
	env, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("mcpServers.%s.env is not a table of variables", entry)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		s, ok := env[k].(string)
		if !ok {
			s = fmt.Sprint(env[k]) // a number or boolean: its text, as a client passes it
		}
		if config.SecretLooking(k, s) {
			path, err := im.keep(entry+"."+k, s, "env."+k, false)
			if err != nil {
				return "", err
			}
			s = "${file:" + path + "}"
		}
		parts = append(parts, config.TOMLKey(k)+" = "+config.TOMLString(s))
	}
	return "env = { " + strings.Join(parts, ", ") + " }\n", nil
}

// inputs replaces the ${input:ID} of an entry's env and headers values
// (VS Code asks the user for them) by ${file:…} of a file to fill in, made
// empty. One in another field is left for MapClientEntry, which skips the
// entry: a secret cannot be in argv.
func (im *importer) inputs(entry string, fields map[string]any) (map[string]any, error) {
	for _, table := range []string{"env", "headers"} {
		var err error
		if fields, err = im.inputsOf(entry, fields, table); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

// inputsOf is inputs for the table field of fields.
func (im *importer) inputsOf(entry string, fields map[string]any, field string) (map[string]any, error) {
	env, ok := fields[field].(map[string]any)
	if !ok {
		return fields, nil
	}
	out := maps.Clone(env)
	for k, v := range env {
		s, ok := v.(string)
		for ok {
			i := strings.Index(s, "${input:")
			end := strings.IndexByte(s[max(i, 0):], '}')
			if i < 0 || end < 0 {
				break
			}
			id := s[i+len("${input:") : i+end]
			from := "VS Code's input " + id
			if desc := im.file.Inputs[id]; desc != "" {
				from += " (" + strconv.Quote(desc) + ")"
			}
			path, err := im.keep(entry+"."+id, "", from, true)
			if err != nil {
				return nil, err
			}
			s = s[:i] + "${file:" + path + "}" + s[i+end+1:]
		}
		if ok {
			out[k] = s
		}
	}
	fields = maps.Clone(fields)
	fields[field] = out
	return fields, nil
}

// headers writes a remote entry's headers as env is written: a value that
// looks like a secret (its header's name, such as Authorization, or its
// text) goes to a file of its own, read with ${file:…}, unless it names a
// variable ("Bearer ${TOKEN}"): the secret is then the variable's, and the
// daemon's environment gives it, as the client's did.
func (im *importer) headers(entry string, v any) (string, error) {
	headers, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("mcpServers.%s.headers is not a table of headers", entry)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		s, ok := headers[k].(string)
		if !ok {
			s = fmt.Sprint(headers[k])
		}
		if config.SecretLooking(k, s) && !strings.Contains(s, "${") {
			path, err := im.keep(entry+"."+k, s, "headers."+k, false)
			if err != nil {
				return "", err
			}
			s = "${file:" + path + "}"
		}
		parts = append(parts, config.TOMLKey(k)+" = "+config.TOMLString(s))
	}
	return "headers = { " + strings.Join(parts, ", ") + " }\n", nil
}

// oauth writes a remote entry's oauth table; a client secret (from
// mcp-remote's --static-oauth-client-info) goes to a file of its own,
// named by client_secret_file.
func (im *importer) oauth(entry string, v any) (string, error) {
	o, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("mcpServers.%s.oauth is not a table", entry)
	}
	o = maps.Clone(o)
	if secret, ok := o["client_secret"].(string); ok {
		path, err := im.keep(entry+".client_secret", secret, "the client secret of mcp-remote's --static-oauth-client-info", false)
		if err != nil {
			return "", err
		}
		delete(o, "client_secret")
		o["client_secret_file"] = path
	}
	return "oauth = " + tomlValue(o) + "\n", nil
}

// keep writes value to the secrets directory as name (mode 0600, the
// directory 0700), and returns the path the configuration reads it by.
// An existing file of the same content is used again; one of other
// content is kept, and the value goes to name-2, name-3….
func (im *importer) keep(name, value, from string, empty bool) (string, error) {
	if im.secrets == "" {
		return "", errors.New("no directory for secrets: neither XDG_CONFIG_HOME nor HOME is set; give one with --secrets DIR")
	}
	if err := os.MkdirAll(im.secrets, 0o700); err != nil {
		return "", err
	}
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, name)
	for n := 1; ; n++ {
		full := filepath.Join(im.secrets, name)
		if n > 1 {
			full += "-" + strconv.Itoa(n)
		}
		old, err := os.ReadFile(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := writeSecret(full, value); err != nil {
				return "", err
			}
			im.created = append(im.created, full)
		case err != nil:
			return "", err
		case !bytes.Equal(bytes.TrimSpace(old), []byte(strings.TrimSpace(value))) && !empty:
			continue // someone else's secret: keep it
		}
		path := full
		if rel, err := filepath.Rel(im.home, full); im.home != "" && err == nil && !strings.HasPrefix(rel, "..") {
			path = "~/" + rel
		}
		im.written = append(im.written, secret{path: path, from: from, empty: empty && len(bytes.TrimSpace(old)) == 0})
		return path, nil
	}
}

// writeSecret creates path holding value, readable by its owner only.
func writeSecret(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// usesClientCwd reports whether a mapped entry's program uses
// ${client.cwd}.
func usesClientCwd(fields map[string]any) bool {
	for _, k := range []string{"command", "args", "env", "cwd", "env_file", "envFile"} {
		if strings.Contains(fmt.Sprint(fields[k]), config.ClientCwd) {
			return true
		}
	}
	return false
}

// tomlValue writes a client's JSON value as TOML: strings quoted, lists
// and tables inline.
func tomlValue(v any) string {
	switch v := v.(type) {
	case string:
		return config.TOMLString(v)
	case []any:
		parts := make([]string, len(v))
		for i, it := range v {
			parts[i] = tomlValue(it)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			parts = append(parts, config.TOMLKey(k)+" = "+tomlValue(v[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return `""`
	}
	return fmt.Sprint(v)
}
