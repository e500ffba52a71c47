package config

import (
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// The rules of the http.* keys that need more than one key or a grammar
// of their own (docs/protocol.md §13.1, §13.5).

var nodeIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// validNodeID: empty, or the alphabet transport/http accepts in a session
// id's tag (visible ASCII an nginx map can match without escaping).
func validNodeID(v any) bool {
	s := v.(string)
	return s == "" || nodeIDRE.MatchString(s)
}

// validHostEntry accepts a Host header value: a name or address, with an
// optional port.
func validHostEntry(s string) bool {
	if s == "" || !plainText(s) || strings.ContainsAny(s, "/?#@") {
		return false
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host = strings.Trim(s, "[]")
	} else if !validPort(port) {
		return false
	}
	return host != ""
}

// validUnixListen accepts the path of http.listen = "unix:PATH": absolute,
// and short enough for a socket address, as daemon.socket.
func validUnixListen(path string) bool {
	return filepath.IsAbs(path) && len(path) <= maxSocketPath && !strings.HasSuffix(path, "/") && plainText(path)
}

// UnixListen returns the socket path of http.listen = "unix:PATH".
func UnixListen(listen string) (string, bool) { return strings.CutPrefix(listen, "unix:") }

// LoopbackListen reports whether a valid http.listen address reaches only
// this machine: 127.0.0.0/8, ::1, localhost, no host (which binds
// 127.0.0.1), or a Unix socket. The daemon judges the address it bound,
// too: a "localhost" that resolves elsewhere is refused there.
func LoopbackListen(listen string) bool {
	if _, ok := UnixListen(listen); ok {
		return true
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "" || host == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.IsLoopback()
}

// checkHTTP refuses a non-loopback http.listen that has neither a token
// nor an explicit http.allow_unauthenticated: anyone who can reach the
// address could otherwise run every tool. http.allow_unauthenticated on a
// listener is a warning: it serves everyone the token would be asked of.
func checkHTTP(c *Config, ok map[string]bool, src map[string]Source) []Problem {
	h := c.HTTP
	if !ok["http.listen"] || h.Listen == "" || !validListen(h.Listen) {
		return nil
	}
	if h.AllowUnauthenticated && ok["http.allow_unauthenticated"] {
		who := "every local user"
		if path, unix := UnixListen(h.Listen); unix {
			who = "every local user who can open " + path
		} else if !LoopbackListen(h.Listen) {
			who = "anyone who can reach " + h.Listen
		}
		return []Problem{{Key: "http.allow_unauthenticated", Source: src["http.allow_unauthenticated"], Warning: true,
			Message: "is true: " + who + " can call every tool, read every served file and reach every hosted server as snodod's user, " +
				"without a token; set it only behind something that authenticates, else set http.auth_token_file"}}
	}
	if LoopbackListen(h.Listen) || h.AuthTokenFile != "" {
		return nil
	}
	return []Problem{{Key: "http.listen", Source: src["http.listen"], Message: "a non-loopback address needs http.auth_token_file " +
		"(a bearer token clients send) or, behind something that authenticates, http.allow_unauthenticated = true; got " + literal(h.Listen)}}
}

// checkAdmin refuses a non-loopback admin.listen: the admin listener
// serves what status shows (docs/observability.md), and is meant for
// this machine's scraper; a remote one reaches it through a proxy.
func checkAdmin(c *Config, ok map[string]bool, src map[string]Source) []Problem {
	a := c.Admin
	if !ok["admin.listen"] || a.Listen == "" || !validListen(a.Listen) || LoopbackListen(a.Listen) {
		return nil
	}
	return []Problem{{Key: "admin.listen", Source: src["admin.listen"], Message: "must be a loopback address (127.0.0.1:PORT, [::1]:PORT, :PORT) " +
		"or unix:PATH: the admin listener serves this machine only; got " + literal(a.Listen)}}
}

// checkAudit refuses an audit log sent both to a file and to journald,
// and a relative audit.file (the daemon's working directory is not the
// user's).
func checkAudit(c *Config, ok map[string]bool, src map[string]Source) []Problem {
	a := c.Audit
	switch {
	case ok["audit.file"] && ok["audit.journald"] && a.File != "" && a.Journald:
		return []Problem{{Key: "audit.journald", Source: src["audit.journald"], Message: "must be false when audit.file is set: the audit log goes to one of them; got true with audit.file " + literal(a.File)}}
	case ok["audit.file"] && a.File != "" && !filepath.IsAbs(a.File):
		return []Problem{{Key: "audit.file", Source: src["audit.file"], Message: "must be an absolute path, got " + literal(a.File)}}
	}
	return nil
}
