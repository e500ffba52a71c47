package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/snodod/snodod/daemon"
	"github.com/snodod/snodod/daemon/control"
)

func connectUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod connect [flags] [NAME]

Connects this process's standard input and output to the running daemon as
one MCP session. This is the command an MCP client's configuration names,
with the absolute path ('command -v snodod': desktop applications do not
get the login shell's PATH):

  {"command": "/home/me/.local/bin/snodod", "args": ["connect"]}

(Claude Code: claude mcp add snodod -- snodod connect; the README shows
each client's file.)

Without NAME the session sees the aggregated view: snodod's own tools and
every hosted server (mcpServers) under <prefix>__ names. With NAME it sees
that one hosted server as if the client had started it itself, names,
instructions and all: replace {"command": "npx", "args": ["-y", "server-x"]}
with {"command": "/home/me/.local/bin/snodod", "args": ["connect", "x"]}. The session also
carries this process's working directory, where share = "cwd" and
"session" servers start.

With --view NAME it sees the view [views.NAME] of the configuration: the
hosted servers, tools, resources and prompts that view holds, under its
names, and nothing else (a call outside it is refused, naming the view);
{"args": ["connect", "--view", "NAME"]}. 'snodod views' lists them. A view
with allowed_uids opens only to the daemon's user and those uids.

It passes its standard input and output to the daemon over the control
socket (SCM_RIGHTS), so the daemon serves the client's own pipe or terminal
directly, then waits until the session ends. A terminal handed over is put
into raw mode while the session lasts (no echo, no line editing), as a
program driving a pty expects. When this process exits or is killed, the
daemon ends the session and restores the terminal.

Typed into by a person (standard input is this process's controlling
terminal), it relays instead: the terminal keeps its echo and line editing,
Enter ends a request, Ctrl-D ends the session. Lines typed this way are
limited to the terminal's 4095 bytes.

With --relay it always connects to the session socket and copies bytes
both ways, for when descriptors cannot be passed; --handover always passes
them (at your own terminal, every key then goes to the daemon: leave with
'snodod kill ID' from another terminal, or by killing this process).

The sockets come from the configuration (or --socket, --control-socket); a
problem elsewhere in it is a warning, not a failure. With the default
paths, it also looks in the other default directories (a daemon started
where XDG_RUNTIME_DIR was set, or unset).

When no daemon answers, connect starts one, as 'emacsclient -a ""' does:
'snodod serve' with this command's --config and socket flags, in the
background (a session of its own; its log in $XDG_STATE_HOME/snodod/
daemon.log, and 'snodod logs' shows its newest lines), waits up to 15 s
until it answers, then connects. Several clients starting at once end with
one daemon. --no-start refuses instead. A daemon that refuses the session,
or a socket this user may not use, is never replaced.

Exit status: 0 when the session ended; 1, with one line on standard error,
when no daemon can be reached or started (every path tried is named), the
daemon refuses the session, or it dies first.

Flags:
`)
	fs, _ := connectFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

type clientOptions struct {
	view     string
	relay    bool
	handover bool
	noStart  bool
	json     bool
	config   string
	keys     *keyFlags
}

func connectFlags() (*flag.FlagSet, *clientOptions) {
	o := &clientOptions{}
	fs := newFlagSet("connect")
	fs.BoolVar(&o.relay, "relay", false, "copy bytes through the session socket instead of passing descriptors")
	fs.BoolVar(&o.handover, "handover", false, "pass the descriptors even when a person is typing at this terminal")
	fs.BoolVar(&o.noStart, "no-start", false, "when no daemon answers, fail instead of starting one")
	fs.StringVar(&o.view, "view", "", "serve the view `NAME` of the configuration ([views.NAME]) instead of the aggregated view")
	addClientFlags(fs, o)
	return fs, o
}

// addClientFlags adds the flags that find the daemon's sockets.
func addClientFlags(fs *flag.FlagSet, o *clientOptions) {
	fs.StringVar(&o.config, "config", "", "the configuration `file` that names the sockets (default: $XDG_CONFIG_HOME/snodod/config.toml, if it exists)")
	o.keys = addKeyFlags(fs, socketKeys)
}

func runConnect(args []string) int {
	fs, o := connectFlags()
	view, status, done := parseFlagsAndName(fs, args, connectUsage)
	if done {
		return status
	}
	if o.view != "" {
		if view != "" {
			fmt.Fprintf(os.Stderr, "snodod connect: --view %s and the server name %s exclude each other; choose one\n", o.view, view)
			return exitUsage
		}
		view = "@" + o.view
	}
	if o.relay && o.handover {
		fmt.Fprintln(os.Stderr, "snodod connect: --relay and --handover exclude each other; choose one")
		return exitUsage
	}
	if o.relay && o.view != "" {
		fmt.Fprintf(os.Stderr, "snodod connect: --relay serves the aggregated view only; drop --relay to open view %s\n", o.view)
		return exitUsage
	}
	if o.relay && view != "" {
		fmt.Fprintf(os.Stderr, "snodod connect: --relay serves the aggregated view only; drop --relay to pass %s through\n", view)
		return exitUsage
	}
	opts := o.keys.options(o.config)
	cfg, status := loadClientConfig("connect", opts)
	if cfg == nil {
		return status
	}
	s := &connection{person: typedByPerson(), view: view}
	s.relaying = o.relay || !o.handover && s.person && view == ""
	s.cwd, _ = os.Getwd()
	// Each place the daemon may be, in order; then a daemon started here.
	var tried []attempt
	for _, at := range endpoints(cfg) {
		status, absent := s.serve(at)
		if absent == nil {
			return status
		}
		tried = append(tried, attempt{s.path(at), absent})
	}
	if o.noStart {
		return connectFailure("", &notFound{tried: tried, defaults: defaultSockets(cfg)})
	}
	logPath, err := startDaemon(cfg, opts)
	if err != nil {
		return connectFailure("", &notFound{tried: tried, defaults: defaultSockets(cfg), start: err, log: logPath})
	}
	own := endpoint{cfg.Daemon.Socket, cfg.Daemon.ControlSocket}
	status, absent := s.serve(own)
	if absent != nil {
		return connectFailure(s.path(own), absent)
	}
	return status
}

// connection is one `snodod connect`: how it serves its session.
type connection struct {
	person   bool // a person types at this process's controlling terminal
	relaying bool // copy bytes through the session socket
	view     string
	cwd      string
}

// path is the socket of at that c uses.
func (c *connection) path(at endpoint) string {
	if c.relaying {
		return at.socket
	}
	return at.control
}

// serve serves the session through the daemon at at, and returns the exit
// status; absent, when no daemon listens there (nothing was sent), says
// why, and the caller may try elsewhere.
func (c *connection) serve(at endpoint) (status int, absent error) {
	if c.relaying {
		return relay(at.socket)
	}
	h, err := (&control.Client{Socket: at.control}).Connect(context.Background(), os.Stdin, os.Stdout, control.ConnectOptions{View: c.view, Cwd: c.cwd})
	if noDaemon(err) {
		return 0, err
	}
	if err != nil {
		return connectFailure(at.control, err), nil
	}
	// A program driving a pty or a pipe is told nothing: standard error
	// may be the very terminal the session now writes frames to. A person
	// who forced a hand-over of their own terminal is told how to leave:
	// it is raw now, so Ctrl-C and Ctrl-D are bytes for the daemon.
	if c.person {
		// The terminal no longer turns "\n" into "\r\n" (raw mode).
		fmt.Fprintf(os.Stderr, "snodod connect: session %d has this terminal in raw mode: every key, Ctrl-C and Ctrl-D included, goes to the daemon; to leave, run 'snodod kill %d' in another terminal, or kill this process (pid %d)\r\n",
			h.Session, h.Session, os.Getpid())
	}
	// The daemon holds its own copies now; this process only waits. When
	// it dies, its control connection ends, and with it the session.
	if err := h.Wait(); err != nil {
		return connectFailure(at.control, err), nil
	}
	return exitOK, nil
}

// connectFailure reports err in one line and returns the failure status.
func connectFailure(path string, err error) int {
	var unreachable *control.UnreachableError
	var refused *control.RefusedError
	var ended *control.SessionError
	var none *notFound
	switch {
	case errors.As(err, &none):
		fmt.Fprintf(os.Stderr, "snodod connect: %v\n", err)
	case errors.As(err, &unreachable):
		fmt.Fprintf(os.Stderr, "snodod connect: %v; is snodod serve running?\n", err)
	case errors.As(err, &refused):
		fmt.Fprintf(os.Stderr, "snodod connect: the daemon at %s refused the session: %s\n", path, refused.Message)
	case errors.As(err, &ended):
		fmt.Fprintf(os.Stderr, "snodod connect: %v\n", err)
	case errors.Is(err, control.ErrDaemonGone):
		fmt.Fprintf(os.Stderr, "snodod connect: the daemon at %s went away before the session ended (did it die?)\n", path)
	default:
		fmt.Fprintf(os.Stderr, "snodod connect: %v\n", err)
	}
	return exitFailure
}

// relay copies standard input to the session socket and the socket to
// standard output; absent says that nothing listens at path. End of input half-closes the socket, so the daemon
// finishes the requests it has and then ends the session; the relay exits
// when the daemon closes the connection, or when standard output fails.
// A daemon that refuses the session writes one line and closes: the relay
// passes the line on, as a hand-over would, and exits 1 with the same
// message.
func relay(path string) (status int, absent error) {
	uc, err := control.Dial(context.Background(), path)
	if noDaemon(err) {
		return 0, err
	}
	if err != nil {
		return connectFailure(path, err), nil
	}
	defer uc.Close()
	if term.IsTerminal(int(os.Stderr.Fd())) {
		fmt.Fprintf(os.Stderr, "connected to snodod at %s (relay); type JSON-RPC lines, Ctrl-D ends\n", path)
	}
	var inputEnded atomic.Bool
	go func() {
		_, _ = io.Copy(uc, os.Stdin)
		inputEnded.Store(true)
		_ = uc.CloseWrite()
	}()
	// The daemon's refusal line is short: it fits in the buffer, and so
	// the first line is seen whole before it is passed on.
	in := bufio.NewReaderSize(uc, 4096)
	first, rerr := in.ReadSlice('\n')
	if _, err := os.Stdout.Write(first); err != nil && !errors.Is(err, syscall.EPIPE) {
		fmt.Fprintf(os.Stderr, "snodod connect: relay: %v\n", err)
		return exitFailure, nil
	}
	if msg, refused := daemon.RefusalMessage(first); refused {
		return connectFailure(path, &control.RefusedError{Message: msg}), nil
	}
	switch {
	case errors.Is(rerr, io.EOF) && len(first) == 0 && !inputEnded.Load():
		// Closed before any answer, while the client could still send:
		// a session that sends no request in time is ended.
		fmt.Fprintln(os.Stderr, "snodod connect: the daemon ended the session before any request was sent (a session must send its first request within daemon.initialize_timeout, 30s by default)")
		return exitFailure, nil
	case errors.Is(rerr, io.EOF):
		return exitOK, nil // the daemon closed the session
	case rerr != nil && !errors.Is(rerr, bufio.ErrBufferFull):
		fmt.Fprintf(os.Stderr, "snodod connect: relay: %v\n", rerr)
		return exitFailure, nil
	}
	if _, err := io.Copy(os.Stdout, in); err != nil && !errors.Is(err, syscall.EPIPE) {
		fmt.Fprintf(os.Stderr, "snodod connect: relay: %v\n", err)
		return exitFailure, nil
	}
	return exitOK, nil
}

// typedByPerson reports whether standard input is this process's
// controlling terminal: a person typing, who needs echo and Enter, which a
// terminal in the raw mode of a handed-over session would not give. A
// program driving a pty of its own (not its controlling terminal) gets the
// handover. TIOCGSID answers only for the caller's controlling terminal
// (or a pty master), which is what tells the two apart.
func typedByPerson() bool {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return false
	}
	_, err := unix.IoctlGetInt(fd, unix.TIOCGSID)
	return err == nil
}
