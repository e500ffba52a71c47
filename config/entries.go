package config

import (
	"maps"
	"path/filepath"
	"slices"
)

// An entry section is a table of named entries chosen by the user
// ([mcpServers.fs], [tools.grep_notes]) rather than a fixed set of keys.
// Its entries are not keys: they have no default, no SNODOD_* variable and
// no flag, and docs/config.md documents their fields in prose. The loader
// hands each section's table, as the file's parser produced it, to the
// section's decode, which converts and validates every entry and reports
// every problem (with Problem.Key the dotted path of the offending field,
// such as "mcpServers.fs.command").
//
// Each section registers itself from its own file's init with
// registerEntrySection; the loader knows none of them by name.
type entrySection struct {
	// name is the top-level table's name, as written in the file
	// ("mcpServers"); it must not also be a keyed section.
	name string
	// decode converts table (nil when the file has none) into c. It runs
	// after the keyed values are converted, so it may read them; ctx says
	// where the table came from and gives the environment for
	// expansions. It returns every problem found.
	decode func(ctx entryContext, table map[string]any, c *Config) []Problem
	// print, when set, returns the section's lines of `snodod config
	// print` for c (values that are secrets shown as <set>).
	print func(c *Config) []printEntry
}

// entryContext is what an entry section's decode may need besides its
// table.
type entryContext struct {
	// Source is where the table came from (the file), for Problem.Source.
	Source Source
	// File is the configuration file's path, "" when none was read:
	// relative paths in entries are taken from its directory.
	File string
	// Env is the environment Load was given (Options.Env), by name.
	Env map[string]string
	// Check is set by `snodod config check` (Check, Inspect): checks that
	// look at the machine (a command on the child's PATH) are problems
	// then, and skipped by Load, where the daemon reports them when it
	// uses the entry.
	Check bool
}

// entrySections holds the registered sections by name.
var entrySections = map[string]*entrySection{}

// registerEntrySection adds s; it panics on a duplicate or a name that is
// a keyed section, which are programming errors every test run catches.
func registerEntrySection(s *entrySection) {
	if _, dup := entrySections[s.name]; dup || sections[s.name] {
		panic("config: entry section " + s.name + " registered twice or also a keyed section")
	}
	entrySections[s.name] = s
}

// entrySectionNames returns the registered names, sorted.
func entrySectionNames() []string { return slices.Sorted(maps.Keys(entrySections)) }

// rules are the program rules of an entry of this context's file.
func (ctx entryContext) rules(server bool) programRules {
	base := ""
	if ctx.File != "" {
		base = filepath.Dir(ctx.File)
	}
	return programRules{server: server, check: ctx.Check, env: ctx.Env, base: base}
}

// path makes p absolute as entries' paths are: ~ is $HOME, and a relative
// path is taken from the configuration file's directory.
func (ctx entryContext) path(p string) string {
	base := ""
	if ctx.File != "" {
		base = filepath.Dir(ctx.File)
	}
	return resolvePath(p, ctx.Env["HOME"], base)
}
