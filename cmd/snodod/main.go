// Command snodod hosts MCP (Model Context Protocol) sessions.
//
// Usage:
//
//	snodod <command> [flags]
//
// Commands:
//
//	serve     run the daemon: many MCP sessions over its sockets
//	connect   connect standard input and output to the daemon as one session
//	status    show the daemon's sessions and load
//	kill      end one session of the daemon
//	config    check a configuration file, or print the effective configuration
//	stdio     serve one MCP session on this process's standard input and output
//	login     log the daemon in to a remote server that asks for OAuth
//	logout    make the daemon forget (and revoke) its tokens for a remote server
//	approve   approve a pinned server's changed tools, or a quarantined server
//	diff      show what a pinned server's tools changed, word by word
//	version   print the snodod version
//	help      show the commands, or one command's flags
//
// The command is thin: it parses flags and calls the packages. Exit status
// 0 means success, 1 a failure (explained in one line on standard error),
// 2 a usage error.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"

	// The hidden launcher mode (docs/security.md, "Sandbox"): a child
	// started through the sandbox re-executes this binary, and the
	// package's init applies the sandbox and starts the server before
	// main and before snodod's configuration, HTTP and MCP packages
	// initialise.
	_ "github.com/snodod/snodod/internal/sandbox"
)

// version is the build version, set with
// go build -ldflags "-X main.version=v1.2.3" (make build does, from git
// describe). When empty, buildVersion reads the binary's build info.
var version string

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand. run gets the arguments after the command's
// name and returns the exit status.
type command struct {
	name    string
	summary string
	run     func(args []string) int
	usage   func(w io.Writer)
}

// commands lists the subcommands in the order help shows them. It is filled
// in init because help refers to it.
var commands []command

func init() {
	commands = []command{
		{"serve", "run the daemon: many MCP sessions over its sockets", runServe, serveUsage},
		{"connect", "connect standard input and output to the daemon as one session", runConnect, connectUsage},
		{"status", "show the daemon's sessions and load", runStatus, statusUsage},
		{"views", "list the configured views with their servers, tools, resources, prompts and sessions", runViews, viewsUsage},
		{"kill", "end one session of the daemon: snodod kill ID", runKill, killUsage},
		{"upgrade", "replace the running daemon by a new binary without closing a session", runUpgrade, upgradeUsage},
		{"config", "check a configuration file, or print the effective configuration", runConfig, configUsage},
		{"stdio", "serve one MCP session on this process's standard input and output", runStdio, stdioUsage},
		{"upstream", "start, stop or restart a hosted server: snodod upstream restart NAME", runUpstream, upstreamUsage},
		{"logs", "print a hosted server's standard error: snodod logs NAME [-f]", runLogs, logsUsage},
		{"audit", "print the audit log: who called which tool, read, prompt, and how it went", runAudit, auditUsage},
		{"login", "log the daemon in to a remote server that asks for OAuth: snodod login NAME", runLogin, loginUsage},
		{"logout", "make the daemon forget (and revoke) its tokens for a remote server: snodod logout NAME", runLogout, logoutUsage},
		{"approve", "approve what a pinned or quarantined hosted server holds: snodod approve NAME [TOOL]", runApprove, approveUsage},
		{"diff", "show what a pinned hosted server's held tools changed, word by word: snodod diff NAME", runDiff, diffUsage},
		{"import", "print a client's MCP servers as snodod configuration, or move them into it (--write): snodod import FILE", runImport, importUsage},
		{"version", "print the snodod version", runVersion, versionUsage},
		{"help", "show the commands, or one command's flags: snodod help <command>", runHelp, helpUsage},
	}
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		return runHelp(args[1:])
	case "-v", "-version", "--version":
		return runVersion(args[1:])
	}
	if c := lookup(args[0]); c != nil {
		return c.run(args[1:])
	}
	fmt.Fprintf(os.Stderr, "snodod: unknown command %q\nRun 'snodod help' for the list of commands.\n", args[0])
	return exitUsage
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usage writes the list of commands, one line each.
func usage(w io.Writer) {
	fmt.Fprint(w, "snodod hosts MCP (Model Context Protocol) sessions.\n\nUsage:\n  snodod <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'snodod <command> --help' for a command's flags; 'snodod --version' prints the version.\n")
}

// newFlagSet returns a command's flag set. Parse errors are reported by
// parseFlags, not by the flag package.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("snodod "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs. When it reports done, the caller returns
// status: 0 after --help (usage on standard output), 2 after a usage error
// (explained on standard error).
func parseFlags(fs *flag.FlagSet, args []string, usage func(io.Writer)) (status int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == flag.ErrHelp:
		usage(os.Stdout)
		return exitOK, true
	case err != nil:
		return usageError(fs.Name(), err.Error()), true
	case fs.NArg() > 0:
		return usageError(fs.Name(), fmt.Sprintf("unexpected argument %q", fs.Arg(0))), true
	}
	return 0, false
}

// usageError writes "<command>: <message>" and where to look next, and
// returns the usage exit status.
func usageError(name, message string) int {
	fmt.Fprintf(os.Stderr, "%s: %s\nRun '%s --help' for usage.\n", name, message, name)
	return exitUsage
}

func runHelp(args []string) int {
	if len(args) == 1 && isHelpFlag(args[0]) {
		helpUsage(os.Stdout)
		return exitOK
	}
	switch len(args) {
	case 0:
		usage(os.Stdout)
		return exitOK
	case 1:
		if c := lookup(args[0]); c != nil {
			c.usage(os.Stdout)
			return exitOK
		}
		fmt.Fprintf(os.Stderr, "snodod help: unknown command %q\nRun 'snodod help' for the list of commands.\n", args[0])
	default:
		fmt.Fprintln(os.Stderr, "snodod help: takes at most one command name")
	}
	return exitUsage
}

// isHelpFlag reports whether arg asks for help, as the flag package reads it.
func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func helpUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: snodod help [command]\n\nShows the commands, or one command's usage and flags.\n")
}

func runVersion(args []string) int {
	fs := newFlagSet("version")
	if status, done := parseFlags(fs, args, versionUsage); done {
		return status
	}
	fmt.Printf("snodod %s (%s %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

func versionUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: snodod version\n\nPrints the snodod version, and the Go version and platform it was built with.\n")
}

// buildVersion returns the version of this binary: the -ldflags override,
// else what its build info says (versionOf).
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionOf(bi)
}

// versionOf reads a version from build info: the module's version, as
// `go install github.com/snodod/snodod/cmd/snodod@v1.2.3` records it, or
// the pseudo-version (revision, and +dirty for uncommitted changes) that
// `go build` records in a git checkout; else, from the VCS stamp alone,
// "dev-<revision>" with "-dirty"; else "dev" (a build with
// -buildvcs=false, or outside a checkout).
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}
