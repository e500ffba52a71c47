package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snodod/snodod/config"
)

func importUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod import FILE

Reads the MCP servers of a client's configuration file (Claude Desktop's
claude_desktop_config.json, Claude Code's .mcp.json, Cursor's mcp.json,
Cline's cline_mcp_settings.json, VS Code's mcp.json) and prints them as
snodod configuration, then the client configuration that replaces them:
each server becomes {"command": "snodod", "args": ["connect", NAME]}, so the
client uses the one copy snodod runs.

Environment values are not printed: each becomes a ${file:…} secret to
fill in (or write ${VAR} to take it from the daemon's environment).
Instead of copying, the file can be imported as it is:

  [upstreams]
  import = ["FILE"]
`)
}

func runImport(args []string) int {
	fs := newFlagSet("import")
	file, status, done := parseFlagsAndName(fs, args, importUsage)
	if done {
		return status
	}
	if file == "" {
		return usageError(fs.Name(), "needs the client configuration FILE to read")
	}
	entries, err := config.ReadClientConfig(file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "snodod import: %s: %v\n", file, err)
		return exitFailure
	}
	if len(entries) == 0 {
		fmt.Fprintf(os.Stderr, "snodod import: %s has no mcpServers (or servers) entries\n", file)
		return exitFailure
	}
	writeImport(os.Stdout, file, entries)
	return exitOK
}

// writeImport prints entries as snodod TOML and the client snippet.
func writeImport(w io.Writer, file string, entries map[string]any) {
	abs, _ := filepath.Abs(file)
	fmt.Fprintf(w, "# The MCP servers of %s, as snodod configuration\n# (add to %s):\n", abs, orNone(config.DefaultFile(nil)))
	var kept []string
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e, _ := entries[name].(map[string]any)
		if key := config.RemoteKey(e); key != "" {
			// A comment only: an empty [mcpServers.NAME] table would not load.
			fmt.Fprintf(w, "\n# mcpServers.%s skipped: a remote server (%s); snodod hosts only local servers for now\n", config.TOMLKey(name), key)
			continue
		}
		fmt.Fprintf(w, "\n[mcpServers.%s]\n", config.TOMLKey(name))
		kept = append(kept, name)
		for _, f := range slices.Sorted(maps.Keys(e)) {
			v := e[f]
			switch f {
			case "command", "cwd":
				fmt.Fprintf(w, "%s = %s\n", f, config.TOMLString(fmt.Sprint(v)))
			case "args":
				list, _ := v.([]any)
				parts := make([]string, len(list))
				for i, a := range list {
					parts[i] = config.TOMLString(fmt.Sprint(a))
				}
				fmt.Fprintf(w, "args = [%s]\n", strings.Join(parts, ", "))
			case "disabled":
				fmt.Fprintf(w, "disabled = %v\n", v)
			case "timeout":
				fmt.Fprintf(w, "request_timeout = %s\n", config.TOMLString(fmt.Sprint(v)+"s"))
			case "env":
				env, _ := v.(map[string]any)
				var parts []string
				for _, k := range slices.Sorted(maps.Keys(env)) {
					val := fmt.Sprint(env[k])
					if !strings.Contains(val, "${") {
						val = "${file:~/.config/snodod/secrets/" + k + "}"
					}
					parts = append(parts, config.TOMLKey(k)+" = "+config.TOMLString(val))
				}
				if len(parts) > 0 {
					fmt.Fprintln(w, "# env values are not copied: put each secret in the file named, or use ${VAR}")
				}
				fmt.Fprintf(w, "env = { %s }\n", strings.Join(parts, ", "))
			default:
				fmt.Fprintf(w, "# %s: a client key snodod does not use\n", f)
			}
		}
	}
	snippet := map[string]map[string]any{}
	for _, name := range kept {
		snippet[name] = map[string]any{"command": "snodod", "args": []string{"connect", name}}
	}
	b, _ := json.MarshalIndent(map[string]any{"mcpServers": snippet}, "", "  ")
	fmt.Fprintf(w, "\n# The client's configuration that replaces them (in %s):\n#\n", abs)
	for _, line := range strings.Split(string(b), "\n") {
		fmt.Fprintf(w, "#   %s\n", line)
	}
}
