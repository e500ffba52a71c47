package daemon

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
)

// activated returns the listeners systemd passed to this process (socket
// activation, sd_listen_fds(3)), by their FileDescriptorName: "session"
// and "control". A single socket with another name (systemd names an
// unnamed one after its .socket unit) is the session socket. It returns
// nothing when LISTEN_PID is not this process: the variables were meant
// for another, and are ignored as systemd requires.
//
// Descriptors named session-<id> are not sockets to listen on: systemd
// kept them in its descriptor store for a daemon that crashed (crash.go).
// They are returned in stored, by name, for the caller to resume or close.
//
// The LISTEN_* variables are unset, so that a process the daemon starts
// does not take the sockets for its own.
func activated() (session, control *net.UnixListener, stored map[string][]*os.File, err error) {
	all := activation.Files(true)
	var files []*os.File
	for _, f := range all {
		if strings.HasPrefix(f.Name(), "session-") {
			if stored == nil {
				stored = map[string][]*os.File{}
			}
			stored[f.Name()] = append(stored[f.Name()], f)
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, nil, stored, nil
	}
	// net.FileListener duplicates the descriptor; the originals are closed.
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	fail := func(err error) (*net.UnixListener, *net.UnixListener, map[string][]*os.File, error) {
		for _, l := range []*net.UnixListener{session, control} {
			if l != nil {
				l.Close()
			}
		}
		for _, fs := range stored {
			closeFiles(fs)
		}
		return nil, nil, nil, err
	}
	for _, f := range files {
		name := f.Name()
		if len(files) == 1 && name != "control" {
			name = "session"
		}
		if name != "session" && name != "control" {
			return fail(fmt.Errorf("systemd passed a socket named %q; name the sockets \"session\" and \"control\" with FileDescriptorName= in snodod.socket", f.Name()))
		}
		ln, err := net.FileListener(f)
		if err != nil {
			return fail(fmt.Errorf("systemd socket %q: %w", name, err))
		}
		ul, ok := ln.(*net.UnixListener)
		if !ok {
			ln.Close()
			return fail(fmt.Errorf("systemd socket %q is not a Unix stream socket; use ListenStream=/path in snodod.socket", name))
		}
		// A listener made from a descriptor never unlinks its path on
		// Close: the socket belongs to systemd, which keeps listening on
		// it after the daemon exits.
		if name == "session" {
			if session != nil {
				ul.Close()
				return fail(fmt.Errorf("systemd passed two sockets named %q", name))
			}
			session = ul
		} else {
			if control != nil {
				ul.Close()
				return fail(fmt.Errorf("systemd passed two sockets named %q", name))
			}
			control = ul
		}
	}
	if session == nil {
		return fail(fmt.Errorf("systemd passed no socket named \"session\" (only %q)", "control"))
	}
	return session, control, stored, nil
}
