package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/mcpclient/oauth"
)

// snodod login NAME and snodod logout NAME: the front of the logins the
// daemon runs (docs/upstreams.md §9). The daemon holds the tokens, so the
// login serves every client; it listens for the browser's redirect on
// 127.0.0.1, and this command shows the URL, opens the browser and passes
// on a redirect pasted by a person whose browser is elsewhere.

func loginUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod login [--no-browser] NAME [flags]

Logs the running daemon in to the remote server NAME (an mcpServers entry
with url) that asks for an OAuth authorization: it prints the
authorization URL and opens it with $BROWSER, or with xdg-open when there
is a display; the browser comes back to the daemon on 127.0.0.1, and the
command says what the login got ("logged in at https://auth.example.com,
scope repo, token valid for 1h, refreshable"). The token is kept in the
daemon's state directory (one file per server, mode 0600) and refreshed
by the daemon: every client's requests to NAME use it, and no client ever
sees it. A daemon is started when none runs.

With --no-browser (an SSH session, a browser on another machine), open
the URL wherever you like; the browser ends on a page that does not load
(http://127.0.0.1:PORT/callback?...): paste that page's URL here.

Flags:
`)
	fs, _, _ := loginFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func loginFlags() (fs *flag.FlagSet, o *clientOptions, noBrowser *bool) {
	fs, o = clientFlagSet("login")
	noBrowser = fs.Bool("no-browser", false, "print the URL only, and read the redirect URL the browser ends on from standard input")
	return fs, o, noBrowser
}

func runLogin(args []string) int {
	fs, o, noBrowser := loginFlags()
	name, st, done := parseFlagsAndName(fs, args, loginUsage)
	if done {
		return st
	}
	if name == "" {
		return usageError(fs.Name(), "needs the NAME of a remote server (snodod status lists them)")
	}
	opts := o.keys.options(o.config)
	cfg, status := loadClientConfig("login", opts)
	if cfg == nil {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, sock := findDaemon(cfg)
	login, err := (&control.Client{Socket: sock}).Login(ctx, name)
	if noDaemon(err) {
		if _, serr := startDaemon(cfg, opts); serr != nil {
			return clientFailure("snodod login", fmt.Errorf("%v; and a daemon could not be started: %v", err, serr))
		}
		login, err = (&control.Client{Socket: cfg.Daemon.ControlSocket}).Login(ctx, name)
	}
	if err != nil {
		return clientFailure("snodod login", err)
	}
	defer login.Close()
	fmt.Fprintf(os.Stderr, "snodod login: open this URL to authorize snodod for %s:\n\n  %s\n\n", name, login.URL)
	if !*noBrowser {
		switch err := oauth.OpenBrowser(ctx, login.URL); {
		case errors.Is(err, oauth.ErrNoBrowser):
			fmt.Fprintln(os.Stderr, "snodod login: no browser to open here ($BROWSER is not set and there is no display); open the URL yourself, then paste below the URL the browser ends on")
			*noBrowser = true
		case err != nil:
			fmt.Fprintf(os.Stderr, "snodod login: the browser could not be opened (%v); open the URL yourself, then paste below the URL the browser ends on\n", err)
			*noBrowser = true
		default:
			fmt.Fprintln(os.Stderr, "snodod login: waiting for the browser (Ctrl-C gives up)…")
		}
	}
	if *noBrowser {
		fmt.Fprint(os.Stderr, "Redirect URL: ")
		go pasteRedirect(login)
	}
	result, err := login.Wait(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "\nsnodod login: given up; nothing changed")
			return exitFailure
		}
		return clientFailure("snodod login", err)
	}
	fmt.Printf("%s: %s\n", name, result)
	return exitOK
}

// pasteRedirect passes the first line a person pastes to the daemon.
func pasteRedirect(login *control.Login) {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if line = strings.TrimSpace(line); line == "" {
		if err == nil || errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "snodod login: no redirect URL given; still waiting for the browser")
		}
		return
	}
	_ = login.Complete(line)
}

func logoutUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod logout NAME [flags]

Makes the running daemon forget its tokens for the remote server NAME,
after revoking them at the server's authorization server when it offers
revocation (RFC 7009). The client's registration is kept for the next
snodod login NAME; until then, a request to NAME gets an error saying to
log in.

Flags:
`)
	fs, _ := clientFlagSet("logout")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runLogout(args []string) int {
	fs, o := clientFlagSet("logout")
	name, st, done := parseFlagsAndName(fs, args, logoutUsage)
	if done {
		return st
	}
	if name == "" {
		return usageError(fs.Name(), "needs the NAME of a remote server (snodod status lists them)")
	}
	client, ctx, stop, status := controlOf("logout", o)
	if client == nil {
		return status
	}
	defer stop()
	revoked, note, err := client.Logout(ctx, name)
	if err != nil {
		return clientFailure("snodod logout", err)
	}
	switch {
	case note != "":
		fmt.Printf("%s: logged out; %s\n", name, note)
	case revoked:
		fmt.Printf("%s: logged out; the tokens were revoked at the authorization server\n", name)
	default:
		fmt.Printf("%s: logged out; the tokens are forgotten (the authorization server offers no revocation)\n", name)
	}
	return exitOK
}
