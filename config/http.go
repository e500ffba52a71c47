package config

import (
	"net"
	"net/netip"
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

// LoopbackListen reports whether a valid http.listen address binds only
// loopback: 127.0.0.0/8, ::1, localhost, or no host (which binds
// 127.0.0.1).
func LoopbackListen(listen string) bool {
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
// address could otherwise run every tool.
func checkHTTP(c *Config, ok map[string]bool, src map[string]Source) []Problem {
	h := c.HTTP
	if !ok["http.listen"] || h.Listen == "" || !validListen(h.Listen) || LoopbackListen(h.Listen) || h.AuthTokenFile != "" || h.AllowUnauthenticated {
		return nil
	}
	return []Problem{{Key: "http.listen", Source: src["http.listen"], Message: "a non-loopback address needs http.auth_token_file " +
		"(a bearer token clients send) or, behind something that authenticates, http.allow_unauthenticated = true; got " + literal(h.Listen)}}
}
