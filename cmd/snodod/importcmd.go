package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/snodod/snodod/config"
)

func importUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod import [--write] [--config FILE] [--secrets DIR] CLIENT_FILE

Reads the MCP servers of a client's configuration file (Claude Desktop's
claude_desktop_config.json, Claude Code's .mcp.json, Cursor's mcp.json,
Windsurf's mcp_config.json, Cline's cline_mcp_settings.json, VS Code's
mcp.json or settings.json, with comments as VS Code writes them) and prints
them as snodod configuration, then the client's configuration that
replaces them, in that client's own format: each server becomes snodod
connect NAME (by the absolute path of this snodod, as GUI clients do not
get the login shell's PATH), so the client uses the one copy snodod runs.

What the entries say is kept, in snodod's syntax: ${env:X} becomes ${X},
${workspaceFolder} ${client.cwd} (with share = "cwd": one instance per
folder), envFile env_file. An env value that looks like a secret (its name
or its text: docs/config.md, "Secrets") is never printed: it is written to
a file of its own, mode 0600, in DIR (default
$XDG_CONFIG_HOME/snodod/secrets), which the entry reads with ${file:...};
other values are copied. A value VS Code asks the user for (${input:ID})
gets an empty such file to fill in, which config check warns about.

Remote servers are kept: url (Windsurf's serverUrl), type "http" or "sse",
and headers (a secret-looking value in a file of its own, as for env). An
entry that runs mcp-remote (npx -y mcp-remote URL [PORT] --header "K: V"
...) becomes the url entry it stands for (its --header, --transport,
--allow-http, --ignore-tool and --static-oauth-client-info included), so
that snodod reaches the server once, with one login, for every client.

--write does it all: it appends the entries to snodod's configuration file
(--config FILE, default $XDG_CONFIG_HOME/snodod/config.toml, made if absent;
an entry it has already is refused), after checking the result as config
check does, and then rewrites CLIENT_FILE in place with the replacement
entries, its other keys as they were, and a copy of it as it was beside it
(CLIENT_FILE.snodod-backup). A running daemon hosts the servers after its
next reload (kill -HUP, or systemctl --user reload snodod).

Instead of copying, the client's file can be read at every load as it is:

  [upstreams]
  import = ["CLIENT_FILE"]
`)
}

func runImport(args []string) int {
	fs := newFlagSet("import")
	write := fs.Bool("write", false, "append the entries to snodod's configuration and rewrite the client's file to use snodod connect")
	target := fs.String("config", "", "snodod's configuration `file` --write appends to (default: $XDG_CONFIG_HOME/snodod/config.toml)")
	secrets := fs.String("secrets", "", "the `directory` secret values are written to (default: $XDG_CONFIG_HOME/snodod/secrets)")
	file, status, done := parseFlagsAndName(fs, args, importUsage)
	if done {
		return status
	}
	if file == "" {
		return usageError(fs.Name(), "needs the client configuration FILE to read")
	}
	cf, err := config.ReadClientFile(file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "snodod import: %s: %v\n", file, err)
		return exitFailure
	}
	if len(cf.Entries) == 0 {
		fmt.Fprintf(os.Stderr, "snodod import: %s has no mcpServers (or servers) entries\n", file)
		return exitFailure
	}
	if *secrets == "" {
		*secrets = config.DefaultSecretsDir(nil)
	}
	home, _ := os.UserHomeDir()
	im := &importer{file: cf, secrets: *secrets, home: home}
	entries, err := im.convert()
	if err != nil {
		fmt.Fprintf(os.Stderr, "snodod import: %v\n", err)
		return exitFailure
	}
	exe := snododPath()
	if !*write {
		writeImport(os.Stdout, cf, entries, im.written, exe, orNone(config.DefaultFile(nil)))
		return exitOK
	}
	if *target == "" {
		if *target = config.DefaultFile(nil); *target == "" {
			return usageError(fs.Name(), "has no configuration file to write to: neither XDG_CONFIG_HOME nor HOME is set; name one with --config FILE")
		}
	}
	if err := writeInPlace(cf, entries, im.written, exe, *target); err != nil {
		for _, p := range im.created {
			os.Remove(p) // nothing was written: the secrets go too
		}
		printConfigError(os.Stderr, "snodod import: ", err)
		return exitFailure
	}
	return exitOK
}

// snododPath is the absolute path of this snodod, for the clients'
// entries; "snodod" when it cannot be found.
func snododPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "snodod"
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		return real
	}
	return exe
}

// writeImport prints the entries as snodod TOML, the secrets written, and
// the client's replacement, as TOML comments: the whole loads as snodod
// configuration.
func writeImport(w io.Writer, cf *config.ClientFile, entries []imported, secrets []secret, exe, target string) {
	abs, _ := filepath.Abs(cf.Path)
	fmt.Fprintf(w, "# The MCP servers of %s, as snodod configuration\n# (add to %s, or let snodod import --write do it):\n", abs, target)
	fmt.Fprint(w, importTOML(entries, secrets))
	fmt.Fprintf(w, "\n# The client's configuration that replaces them (in %s):\n#\n", abs)
	for _, line := range strings.Split(clientSnippet(cf, entries, exe), "\n") {
		fmt.Fprintf(w, "#   %s\n", line)
	}
}

// importTOML is the entries' tables, a line for each one skipped, and the
// list of secret files.
func importTOML(entries []imported, secrets []secret) string {
	var b strings.Builder
	for _, e := range entries {
		if e.skipped != "" {
			// A comment only: an empty [mcpServers.NAME] table would not load.
			fmt.Fprintf(&b, "\n# mcpServers.%s skipped: %s\n", config.TOMLKey(e.name), e.skipped)
			continue
		}
		b.WriteString("\n" + e.toml)
	}
	if len(secrets) > 0 {
		b.WriteString("\n# Secrets, each in a file of its own (mode 0600), never printed:\n")
		for _, s := range secrets {
			if s.empty {
				fmt.Fprintf(&b, "#   %s: empty; write the value of %s into it\n", s.path, s.from)
			} else {
				fmt.Fprintf(&b, "#   %s, from %s\n", s.path, s.from)
			}
		}
	}
	return b.String()
}

// clientSnippet is the client's configuration of the imported entries,
// in its own shape: mcpServers, or VS Code's servers with a type.
func clientSnippet(cf *config.ClientFile, entries []imported, exe string) string {
	servers := map[string]any{}
	for _, e := range entries {
		if e.skipped == "" {
			servers[e.name] = connectEntry(cf, e.name, exe)
		}
	}
	var doc any = servers
	key := cf.Key
	if len(key) == 0 {
		key = []string{"mcpServers"}
	}
	for i := len(key) - 1; i >= 0; i-- {
		doc = map[string]any{key[i]: doc}
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b)
}

// connectJSON is a client's entry that runs snodod connect, its members
// in the order clients' documentation writes them.
type connectJSON struct {
	Type    string   `json:"type,omitempty"` // VS Code's, "stdio"
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// connectEntry is the client's entry that runs snodod connect name.
func connectEntry(cf *config.ClientFile, name, exe string) connectJSON {
	e := connectJSON{Command: exe, Args: []string{"connect", name}}
	if cf.VSCode() {
		e.Type = "stdio"
	}
	return e
}
