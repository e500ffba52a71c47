package http

import (
	"crypto/subtle"
	"maps"
	"net"
	nethttp "net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/snodod/snodod/protocol"
)

// The checks every request passes before its body is read (docs/protocol.md
// §13.1): Host (DNS rebinding), Origin (cross-site pages), then who the
// client is: a local peer of an allowed uid, else the bearer token. Each
// refusal has a JSON-RPC error body, so that a client can tell it from a
// proxy's page.

var (
	errOriginNotAllowed = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Origin not allowed"}
	errUnauthorized     = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Unauthorized: send Authorization: Bearer <the token of http.auth_token_file>"}
)

// hostNotAllowed names the refused Host, cut to a length a log line and a
// client's error display can hold.
func hostNotAllowed(host string) *protocol.Error {
	if len(host) > 100 {
		host = host[:100] + "…"
	}
	return &protocol.Error{Code: protocol.CodeInvalidRequest,
		Message: "Host not allowed: " + strconv.Quote(host) + " is not a loopback name, the listener's own address, or listed in http.allowed_hosts"}
}

// peerRefused is the 403 of a local peer whose uid is not allowed, in the
// words the session socket uses for it.
func peerRefused(p Peer) *protocol.Error {
	if p.Err != nil {
		return &protocol.Error{Code: protocol.CodeInvalidRequest,
			Message: "Connection refused: the local user at the other end could not be identified (" + p.Err.Error() + ")"}
	}
	return &protocol.Error{Code: protocol.CodeInvalidRequest,
		Message: "Connection refused: uid " + strconv.Itoa(p.UID) + " is not allowed (daemon.allowed_uids)"}
}

// The RFC 6750 §3 challenges of a 401: error="invalid_token" when a
// bearer token was sent and is not the one, none when no bearer token was
// sent (another scheme is no bearer token).
const (
	challenge             = `Bearer realm="snodod"`
	challengeInvalidToken = `Bearer realm="snodod", error="invalid_token"`
)

// refusal is why a request is refused before anything is served.
type refusal struct {
	status int
	err    *protocol.Error
	// reason counts it in Stats.Refused.
	reason string
	// challenge is the 401's WWW-Authenticate.
	challenge string
}

// guard holds the allow-lists, built once.
type guard struct {
	o       *Options
	origins map[string]bool // lowered scheme://host[:port]
	hosts   map[string]bool // lowered host or host:port
	token   []byte
}

func newGuard(o *Options) *guard {
	g := &guard{o: o, origins: map[string]bool{}, hosts: map[string]bool{}}
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

// check returns why r is refused, or nil when it may go on; peer is its
// connection's.
func (g *guard) check(r *nethttp.Request, peer func() Peer) *refusal {
	if !g.hostAllowed(r) {
		return &refusal{status: nethttp.StatusForbidden, err: hostNotAllowed(r.Host), reason: "host"}
	}
	// Every Origin header: a request with two must not pass on the
	// first alone.
	for _, origin := range r.Header.Values("Origin") {
		if !g.originAllowed(origin) {
			return &refusal{status: nethttp.StatusForbidden, err: errOriginNotAllowed, reason: "origin"}
		}
	}
	p := peer()
	if p.known() && g.o.PeerAllowed != nil && g.o.PeerAllowed(p.UID) {
		return nil // a local user the socket would serve needs no token
	}
	if g.token != nil {
		auth := r.Header.Get("Authorization")
		if g.authorized(auth) {
			return nil
		}
		c := challenge
		if scheme, _, _ := strings.Cut(auth, " "); strings.EqualFold(scheme, "Bearer") {
			c = challengeInvalidToken
		}
		return &refusal{status: nethttp.StatusUnauthorized, err: errUnauthorized, reason: "unauthorized", challenge: c}
	}
	if p.Local && !g.o.AllowUnauthenticated {
		return &refusal{status: nethttp.StatusForbidden, err: peerRefused(p), reason: "peer"}
	}
	return nil
}

// checkView is check for a view with its own Access rule: the Host and
// Origin rules, then access.
func (g *guard) checkView(r *nethttp.Request, peer func() Peer, access func(Peer, string) *protocol.Error) *refusal {
	if !g.hostAllowed(r) {
		return &refusal{status: nethttp.StatusForbidden, err: hostNotAllowed(r.Host), reason: "host"}
	}
	for _, origin := range r.Header.Values("Origin") {
		if !g.originAllowed(origin) {
			return &refusal{status: nethttp.StatusForbidden, err: errOriginNotAllowed, reason: "origin"}
		}
	}
	bearer := ""
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		bearer = strings.TrimSpace(token)
	}
	err := access(peer(), bearer)
	switch {
	case err == nil:
		return nil
	case bearer == "":
		return &refusal{status: nethttp.StatusUnauthorized, err: err, reason: "view", challenge: challenge}
	}
	return &refusal{status: nethttp.StatusForbidden, err: err, reason: "view"}
}

// hostAllowed applies the Host rule: with AllowedHosts, Host must be a
// loopback name, the listener's own address or listed; without, a
// listener bound to loopback accepts only those (a rebound DNS name
// points a browser's page at 127.0.0.1 with its own Host). A page cannot
// rebind an address literal, so the listener's own is always safe: a
// listener on 127.0.0.2 serves "127.0.0.2:PORT".
func (g *guard) hostAllowed(r *nethttp.Request) bool {
	host := strings.ToLower(r.Host)
	local := localAddr(r)
	if len(g.hosts) == 0 && !local.Addr().Unmap().IsLoopback() {
		return true
	}
	name := hostName(host)
	if loopbackName(name) || g.hosts[host] || g.hosts[name] {
		return true
	}
	a, err := netip.ParseAddr(name)
	return err == nil && local.IsValid() && a.Unmap() == local.Addr().Unmap()
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

// localAddr is the address the connection arrived on; invalid for a Unix
// socket.
func localAddr(r *nethttp.Request) netip.AddrPort {
	addr, _ := r.Context().Value(nethttp.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(addr.String())
	return ap
}

// refusals counts refused requests by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (c *refusals) add(reason string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]uint64{}
	}
	c.n[reason]++
	c.mu.Unlock()
}

func (c *refusals) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}
