package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// serverWarnings adds what config check reports about an entry that
// loads.
func serverWarnings(f field, u *Upstream, e *serverEntry) {
	var ignored []string
	for _, k := range []struct {
		name string
		key  ignoredKey
	}{{"alwaysAllow", e.AlwaysAllow}, {"autoApprove", e.AutoApprove}, {"transportType", e.TransportType}, {"watchPaths", e.WatchPaths}} {
		if k.key.given {
			ignored = append(ignored, k.name)
		}
	}
	if len(ignored) > 0 {
		f.warn("ignored client keys " + join(ignored, "and") + ": snodod does not use them")
	}
	if u.Share == "all" && u.UsesClientCwd() {
		f.child("share").warn(`uses ${client.cwd} with share = "all": one instance serves every client, started in $HOME; set share = "cwd" or "session"`)
	}
	base := filepath.Base(u.Command)
	if base == "npx" || base == "uvx" {
		pkg, yes := packageArg(u.Args)
		if base == "npx" && !yes {
			f.child("args").warn(`runs npx without -y: npx waits for a confirmation nobody can give; add "-y"`)
		}
		if pkg != "" && !pinned(base, pkg) {
			f.child("args").warn(fmt.Sprintf("runs %s %s without a version: every start may fetch a different release; pin it (%s)",
				base, quote(pkg), pinExample(base, pkg)))
		}
	}
}

// packageArg returns the package npx or uvx runs (its first argument that
// is not a flag) and whether -y or --yes was given before it.
func packageArg(args []string) (pkg string, yes bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-y" || a == "--yes":
			yes = true
		case a == "-p" || a == "--package" || a == "--from" || a == "--with":
			if i+1 < len(args) {
				return args[i+1], yes
			}
		case strings.HasPrefix(a, "-"):
		default:
			return a, yes
		}
	}
	return "", yes
}

func pinned(runner, pkg string) bool {
	if runner == "uvx" && strings.ContainsAny(pkg, "=<>~") {
		return true
	}
	at := strings.LastIndexByte(pkg, '@')
	return at > 0 && at < len(pkg)-1
}

func pinExample(runner, pkg string) string {
	if runner == "uvx" {
		return quote(pkg + "==1.2.3")
	}
	return quote(pkg + "@1.2.3")
}

// catalogWarnings says where a tool or prompt of the configuration has the
// name an upstream's item would have in the aggregated view
// (<prefix>__<name>): the daemon's own catalog wins there, and the
// upstream's item, if it has one, is listed as collided (docs/upstreams.md
// §2). Whether it has one only its catalog tells, which config check
// reads from the cache of servers that have run.
func catalogWarnings(c *Config) []Problem {
	byPrefix := map[string]string{}
	for _, u := range c.MCPServers {
		if !u.Disabled {
			byPrefix[u.Prefix] = u.Name
		}
	}
	var out []Problem
	check := func(kind, section, name string) {
		prefix, item, ok := strings.Cut(name, "__")
		server, hosted := byPrefix[prefix]
		if !ok || !hosted || item == "" {
			return
		}
		out = append(out, Problem{Key: section + "." + tomlKey(name), Source: Source{Kind: FromFile, Name: c.file}, Warning: true,
			Message: fmt.Sprintf("is also the name of mcpServers.%s's %s %s in the aggregated view, if %s has one: snodod's own %s wins, "+
				"and %s's is not listed (snodod status shows it as collided)", tomlKey(server), kind, item, server, kind, server)})
	}
	for _, t := range c.Tools {
		check("tool", "tools", t.Name)
	}
	for _, p := range c.Prompts {
		check("prompt", "prompts", p.Name)
	}
	return out
}
