package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
)

func configUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  snodod config check [FILE]
  snodod config print [--json] [--config FILE]

check validates FILE (default: the default configuration file) on top of
the defaults, without the environment or flags, so the file is judged on
its own: every key, every [tools], [resources] and [prompts] entry
(commands found on PATH, placeholders, paths, templates, schemas, names),
and every [mcpServers] entry (its command on the child's PATH). It prints
"ok: FILE" and exits 0, or prints every problem, one per line, and exits
1. Warnings (a placeholder that can become an option, client keys it
ignores, unpinned npx or uvx packages, and, from the catalog cache of
hosted servers that have run, names that collide or are shortened over 64
characters) are printed as "warning: ..." lines and do not fail the check.

print shows the effective configuration (defaults, the file, SNODOD_*
environment variables) as TOML, every key with where its value came from;
--json prints one object keyed by key, each {"value": ..., "source": ...}.

The keys and their defaults are listed in docs/config.md.
`)
}

func runConfig(args []string) int {
	if len(args) == 0 {
		return usageError("snodod config", "needs a subcommand: check or print")
	}
	switch args[0] {
	case "check":
		return runConfigCheck(args[1:])
	case "print":
		return runConfigPrint(args[1:])
	case "-h", "-help", "--help", "help":
		configUsage(os.Stdout)
		return exitOK
	}
	return usageError("snodod config", fmt.Sprintf("unknown subcommand %q; the subcommands are check and print", args[0]))
}

func runConfigCheck(args []string) int {
	flags := newFlagSet("config check")
	if err := flags.Parse(args); err != nil {
		if err == flag.ErrHelp {
			configUsage(os.Stdout)
			return exitOK
		}
		return usageError(flags.Name(), err.Error())
	}
	if flags.NArg() > 1 {
		return usageError(flags.Name(), fmt.Sprintf("takes at most one file, got %q", flags.Args()))
	}
	path := flags.Arg(0)
	cfg, err := config.Inspect(path)
	if err == nil {
		// The configured items as the daemon would build them: schemas the
		// runtime compiles, names snodod serves itself. (Upstream tools
		// and prompts join through catalog.Reserved once they are hosted.)
		if problems := catalog.Check(cfg, catalog.Reserved{}); len(problems) > 0 {
			err = &config.ValidationError{File: cfg.File(), Problems: problems}
		}
	}
	if err != nil {
		printConfigError(os.Stderr, "", err)
		return exitFailure
	}
	printConfigWarnings(os.Stderr, cfg)
	shown := path
	if shown == "" {
		shown = config.DefaultFile(nil)
		if _, err := os.Stat(shown); shown == "" || errors.Is(err, fs.ErrNotExist) {
			fmt.Printf("ok: no configuration file (%s is absent); the defaults apply\n", orNone(shown))
			return exitOK
		}
	}
	fmt.Printf("ok: %s\n", shown)
	return exitOK
}

func orNone(s string) string {
	if s == "" {
		return "no default file: neither XDG_CONFIG_HOME nor HOME is set"
	}
	return s
}

func runConfigPrint(args []string) int {
	fs := newFlagSet("config print")
	asJSON := fs.Bool("json", false, "print JSON instead of TOML")
	file := fs.String("config", "", "the configuration `file` (default: $XDG_CONFIG_HOME/snodod/config.toml)")
	if status, done := parseFlags(fs, args, configUsage); done {
		return status
	}
	cfg := loadConfig("config print", config.Options{File: *file})
	if cfg == nil {
		return exitFailure
	}
	var err error
	if *asJSON {
		err = cfg.PrintJSON(os.Stdout)
	} else {
		err = cfg.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "snodod config print: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// loadConfig loads the configuration for the command name ("serve",
// "config print"); on failure it reports every problem and returns nil.
func loadConfig(name string, opts config.Options) *config.Config {
	cfg, err := config.Load(opts)
	if err != nil {
		printConfigError(os.Stderr, "snodod "+name+": ", err)
		return nil
	}
	return cfg
}

// printConfigError writes a loading error: one line per problem of a
// *config.ValidationError, else the error's own line(s), each prefixed.
func printConfigError(w io.Writer, prefix string, err error) {
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Fprintf(w, "%s%s\n", prefix, p)
		}
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "%s%s\n", prefix, line)
	}
}

// keyFlags are command-line shortcuts for configuration keys. Their values
// are handed to config.Load as text, read as an environment value is, so
// a bad one is reported by the configuration's validation with the flag's
// name: `daemon.max_sessions: must be a positive integer, got "x" (flag
// --max-sessions)`.
type keyFlags struct {
	fs     *flag.FlagSet
	values map[string]*string // flag name → value
	keys   map[string]string  // flag name → key
}

func addKeyFlags(fs *flag.FlagSet, pairs ...string) *keyFlags {
	k := &keyFlags{fs: fs, values: map[string]*string{}, keys: map[string]string{}}
	info := map[string]config.Key{}
	for _, key := range config.Keys() {
		info[key.Name] = key
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		name, key := pairs[i], pairs[i+1]
		about := info[key]
		k.keys[name] = key
		// The backquoted type is the value's name in -help: "-max-sessions integer".
		k.values[name] = fs.String(name, "", fmt.Sprintf("%s (%s: `%s`, default %s)",
			strings.TrimSuffix(about.Description, "."), key, about.Type, about.Default))
	}
	return k
}

// options returns the configuration options of the flags that were given.
func (k *keyFlags) options(file string) config.Options {
	o := config.Options{File: file, Overrides: map[string]any{}, Flags: map[string]string{}}
	k.fs.Visit(func(f *flag.Flag) {
		if key, ok := k.keys[f.Name]; ok {
			o.Overrides[key] = *k.values[f.Name]
			o.Flags[key] = "--" + f.Name
		}
	})
	return o
}

// newLogger returns the daemon's logger on standard error, in cfg's format,
// at a level that can change on reload.
func newLogger(cfg *config.Config, level *slog.LevelVar) *slog.Logger {
	level.Set(parseLevel(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}
