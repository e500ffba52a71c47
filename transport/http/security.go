package http

import (
	"crypto/subtle"
	"net"
	nethttp "net/http"
	"net/netip"
	"strings"

	"github.com/snodod/snodod/protocol"
)

// The checks every request passes before its body is read (docs/protocol.md
// §13.1): Host (DNS rebinding), Origin (cross-site pages), then the bearer
// token. Each refusal has a JSON-RPC error body, so that a client can tell
// it from a proxy's page.

var (
	errHostNotAllowed   = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Host not allowed"}
	errOriginNotAllowed = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Origin not allowed"}
	errUnauthorized     = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Unauthorized: send Authorization: Bearer <the token of http.auth_token_file>"}
)

// guard holds the allow-lists, built once.
type guard struct {
	origins map[string]bool // lowered scheme://host[:port]
	hosts   map[string]bool // lowered host or host:port
	token   []byte
}

func newGuard(o *Options) *guard {
	g := &guard{origins: map[string]bool{}, hosts: map[string]bool{}}
	for _, s := range o.AllowedOrigins {
		if origin, ok := parseOrigin(s); ok {
			g.origins[origin] = true
		}
	}
	for _, h := range o.AllowedHosts {
		g.hosts[strings.ToLower(h)] = true
	}
	if o.AuthToken != "" {
		g.token = []byte(o.AuthToken)
	}
	return g
}

// check returns the status and error refusing r, or 0 when r may go on.
func (g *guard) check(r *nethttp.Request) (int, *protocol.Error) {
	if !g.hostAllowed(r) {
		return nethttp.StatusForbidden, errHostNotAllowed
	}
	if origin := r.Header.Get("Origin"); origin != "" && !g.originAllowed(origin) {
		return nethttp.StatusForbidden, errOriginNotAllowed
	}
	if g.token != nil && !g.authorized(r.Header.Get("Authorization")) {
		return nethttp.StatusUnauthorized, errUnauthorized
	}
	return 0, nil
}

// hostAllowed applies the Host rule: with AllowedHosts, Host must be a
// loopback name or listed; without, a listener bound to loopback accepts
// only loopback names (a rebound DNS name points a browser's page at
// 127.0.0.1 with its own Host).
func (g *guard) hostAllowed(r *nethttp.Request) bool {
	host := strings.ToLower(r.Host)
	if len(g.hosts) == 0 && !boundToLoopback(r) {
		return true
	}
	name := hostName(host)
	if loopbackName(name) {
		return true
	}
	return g.hosts[host] || g.hosts[name]
}

// originAllowed: http or https on a loopback name, any port, or listed.
func (g *guard) originAllowed(origin string) bool {
	o, ok := parseOrigin(origin)
	if !ok {
		return false
	}
	if g.origins[o] {
		return true
	}
	scheme, hostport, _ := strings.Cut(o, "://")
	if scheme != "http" && scheme != "https" {
		return false
	}
	return loopbackName(hostName(hostport))
}

// hostName is the host of host[:port], without an IPv6 address's brackets.
func hostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func (g *guard) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), g.token) == 1
}

// loopbackName: the three names docs/protocol.md §13.1 allows.
func loopbackName(name string) bool {
	return name == "localhost" || name == "127.0.0.1" || name == "::1"
}

// boundToLoopback reports whether the connection arrived on a loopback
// address.
func boundToLoopback(r *nethttp.Request) bool {
	addr, _ := r.Context().Value(nethttp.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	return err == nil && ap.Addr().IsLoopback()
}
