package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
)

func configUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  snodod config check [FILE | --config FILE]
  snodod config print [--json] [FILE | --config FILE]

check validates FILE (default: the default configuration file) on top of
the defaults, without the environment or flags, so the file is judged on
its own, in one pass: every key (the files of server.state_key_file and
http.auth_token_file must hold at least 32 bytes, as serve requires), every
[tools], [resources] and [prompts] entry (commands found on PATH,
placeholders, paths, templates, schemas, names snodod serves itself), and
every [mcpServers] entry (its command on the child's PATH, prefixes that
clash). It prints "ok: FILE" and exits 0, or prints every problem, one per
line, and exits 1. A client's own file (claude_desktop_config.json, VS
Code's mcp.json) is named for what it is: it belongs in upstreams.import,
or in snodod import. Warnings (a placeholder that can become an option,
unless the tool sets allow_option_values = true; client keys it ignores;
unpinned npx or uvx packages; a tool named as a hosted server's is in the
aggregated view; and, from the catalog cache of hosted servers that have
run, names that collide or are shortened over 64 characters) are printed
as "warning: ..." lines and do not fail the check.

print shows the effective configuration (defaults, the file, SNODOD_*
environment variables) as TOML, every key with where its value came from,
and the entries field by field as written: a ${file:...} secret by its
path, an env value that looks like a secret as <set>, so that the output
loads back; --json prints one object keyed by key, each {"value": ...,
"source": ...}.

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
	file := flags.String("config", "", "the configuration `file` to check (or name it as the argument)")
	if err := flags.Parse(args); err != nil {
		if err == flag.ErrHelp {
			configUsage(os.Stdout)
			return exitOK
		}
		return usageError(flags.Name(), err.Error())
	}
	path, ok := fileArg(flags, *file)
	if !ok {
		return exitUsage
	}
	cfg, err := checkConfig(path)
	if err != nil {
		printConfigError(os.Stderr, "", err)
		return exitFailure
	}
	printConfigWarnings(os.Stderr, cfg)
	printSandboxes(os.Stdout, cfg)
	if cfg.File() == "" { // no path given, and the default file is absent
		fmt.Printf("ok: no configuration file (%s is absent); the defaults apply\n", orNone(config.DefaultFile(nil)))
		return exitOK
	}
	fmt.Printf("ok: %s\n", cfg.File())
	return exitOK
}

// checkConfig judges the configuration file path as config check does
// (config.Inspect: "" is the default file), with the catalog's own checks:
// schemas the runtime compiles, names snodod serves itself. Every problem
// comes in one *config.ValidationError.
func checkConfig(path string) (*config.Config, error) {
	cfg, err := config.Inspect(path)
	if cfg == nil {
		return nil, err
	}
	var problems []config.Problem
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		problems = ve.Problems
	}
	if more := catalog.Check(cfg, catalog.Reserved{}); len(more) > 0 {
		problems = config.SortProblems(append(problems, more...))
	}
	if len(problems) > 0 {
		return cfg, &config.ValidationError{File: cfg.File(), Problems: problems}
	}
	return cfg, nil
}

// fileArg returns the file a config subcommand names, as its argument or
// with --config (both are accepted by both subcommands); naming two files
// is a usage error, reported here.
func fileArg(flags *flag.FlagSet, fromFlag string) (path string, ok bool) {
	switch {
	case flags.NArg() > 1:
		usageError(flags.Name(), fmt.Sprintf("takes at most one file, got %q", flags.Args()))
		return "", false
	case flags.NArg() == 1 && fromFlag != "" && flags.Arg(0) != fromFlag:
		usageError(flags.Name(), fmt.Sprintf("names two files, %q and --config %q; give one", flags.Arg(0), fromFlag))
		return "", false
	case flags.NArg() == 1:
		return flags.Arg(0), true
	}
	return fromFlag, true
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
	file := fs.String("config", "", "the configuration `file` (default: $XDG_CONFIG_HOME/snodod/config.toml), or name it as the argument")
	switch err := fs.Parse(args); {
	case err == flag.ErrHelp:
		configUsage(os.Stdout)
		return exitOK
	case err != nil:
		return usageError(fs.Name(), err.Error())
	}
	path, ok := fileArg(fs, *file)
	if !ok {
		return exitUsage
	}
	cfg, status := loadConfig("config print", config.Options{File: path})
	if cfg == nil {
		return status
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
// "config print"). On failure it reports every problem and returns nil and
// the exit status: a usage error (2) when every problem is a flag's, with
// where to look next, else a failure (1).
func loadConfig(name string, opts config.Options) (*config.Config, int) {
	cfg, err := config.Load(opts)
	if err != nil {
		printConfigError(os.Stderr, "snodod "+name+": ", err)
		if fromFlags(err) {
			fmt.Fprintf(os.Stderr, "Run 'snodod %s --help' for the flags and their defaults.\n", name)
			return nil, exitUsage
		}
		return nil, exitFailure
	}
	return cfg, exitOK
}

// loadClientConfig loads the configuration for a client of the daemon
// (connect, status, kill), which needs only the socket paths: a problem
// elsewhere is shown as a warning, and the command goes on.
func loadClientConfig(name string, opts config.Options) (*config.Config, int) {
	cfg, warnings, err := config.LoadClient(opts)
	if err != nil {
		return loadConfig(name, opts) // reports it as every command does
	}
	for _, w := range warnings {
		printConfigError(os.Stderr, "snodod "+name+": warning: ", w)
	}
	if len(warnings) > 0 {
		fmt.Fprintf(os.Stderr, "snodod %s: warning: going on, as only the socket paths are needed here; 'snodod config check' shows the problems the daemon would refuse\n", name)
	}
	return cfg, exitOK
}

// findDaemon returns the sockets of the daemon a client talks to: cfg's,
// unless nothing is there, the paths are the defaults, and a daemon
// started in another environment listens in one of the other default
// directories (see config.Config.DefaultSocketDirs): an MCP client that
// starts 'snodod connect' without XDG_RUNTIME_DIR still finds the daemon
// the user started from a login shell, and the other way round.
func findDaemon(cfg *config.Config) (socket, control string) {
	socket, control = cfg.Daemon.Socket, cfg.Daemon.ControlSocket
	if isSocket(control) {
		return socket, control
	}
	for _, dir := range cfg.DefaultSocketDirs() {
		if c := filepath.Join(dir, "control.sock"); isSocket(c) {
			return filepath.Join(dir, filepath.Base(socket)), c
		}
	}
	return socket, control
}

func isSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}

// fromFlags reports whether err is a *config.ValidationError all of whose
// problems came from flags.
func fromFlags(err error) bool {
	var ve *config.ValidationError
	if !errors.As(err, &ve) {
		return false
	}
	for _, p := range ve.Problems {
		if p.Source.Kind != config.FromFlag {
			return false
		}
	}
	return true
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

// keyFlags are the command-line flags of configuration keys, the same
// mechanism for every command: each key's flag name, help text and type
// come from config.Keys (and so, for a limit, from package limits), and its
// value is handed to config.Load as text, read as an environment value is.
// A bad value is then reported by the configuration's validation with the
// flag's name, the same way in every command:
// `session.request_timeout: must be a positive duration with a unit, such
// as "5s", got "5" (flag --request-timeout)`.
type keyFlags struct {
	fs     *flag.FlagSet
	values map[string]*string // flag name → value
	bools  map[string]*bool   // flag name → value, for a boolean key
	keys   map[string]string  // flag name → key
}

// addKeyFlags adds to fs the flag of every key with one that want accepts.
func addKeyFlags(fs *flag.FlagSet, want func(config.Key) bool) *keyFlags {
	k := &keyFlags{fs: fs, values: map[string]*string{}, bools: map[string]*bool{}, keys: map[string]string{}}
	for _, key := range config.Keys() {
		if key.Flag == "" || !want(key) {
			continue
		}
		k.keys[key.Flag] = key.Name
		if key.Type == "boolean" { // --demo, or --demo=false
			k.bools[key.Flag] = fs.Bool(key.Flag, false, fmt.Sprintf("%s (%s)", strings.TrimSuffix(key.Description, "."), key.Name))
			continue
		}
		// The backquoted type is the value's name in -help: "-max-sessions integer".
		k.values[key.Flag] = fs.String(key.Flag, "", fmt.Sprintf("%s (%s: `%s`, default %s)",
			strings.TrimSuffix(key.Description, "."), key.Name, key.Type, key.Default))
	}
	return k
}

// allKeys accepts every key: `snodod serve` has every key's flag.
func allKeys(config.Key) bool { return true }

// sessionKeys accepts the keys `snodod stdio` applies.
func sessionKeys(k config.Key) bool { return !k.DaemonOnly }

// socketKeys accepts the keys that find the daemon, for its clients.
func socketKeys(k config.Key) bool {
	return k.Name == "daemon.socket" || k.Name == "daemon.control_socket"
}

// options returns the configuration options of the flags that were given.
func (k *keyFlags) options(file string) config.Options {
	o := config.Options{File: file, Overrides: map[string]any{}, Flags: map[string]string{}}
	k.fs.Visit(func(f *flag.Flag) {
		if key, ok := k.keys[f.Name]; ok {
			if b, ok := k.bools[f.Name]; ok {
				o.Overrides[key] = *b
			} else {
				o.Overrides[key] = *k.values[f.Name]
			}
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
