package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// discovery is what authorizing one server found out: the resource
// identifier its tokens are requested for, its protected resource metadata
// (nil when it publishes none: the 2025-03-26 fallback) and its
// authorization server's validated metadata.
type discovery struct {
	resource string
	prm      *ResourceMetadata
	as       *ServerMetadata
}

// discover finds the authorization server of the MCP server, starting
// from the challenge of its 401 (nil when there was none): the protected
// resource metadata (RFC 9728) at the challenge's resource_metadata URL,
// else at the path-aware well-known URL, then at the root one; then the
// authorization server's metadata (RFC 8414, then OpenID Connect
// Discovery). Each document is validated as the MCP authorization
// specification requires: the resource must be this server (resource
// mismatch), the issuer must be the identifier the well-known URL was built
// from (issuer mismatch), endpoints must be HTTPS (or loopback), and the
// authorization-code grant needs PKCE S256.
func (a *Authorizer) discover(ctx context.Context, ch *Challenge) (*discovery, error) {
	prm, err := a.fetchResourceMetadata(ctx, ch)
	if err != nil {
		return nil, err
	}
	d := &discovery{prm: prm}
	var issuers []string
	if prm != nil {
		d.resource = prm.Resource
		issuers = prm.AuthorizationServers
	} else {
		// No protected resource metadata anywhere: the 2025-03-26
		// revision's rule, the MCP server's origin is its authorization
		// server.
		d.resource = canonicalResource(a.server)
		issuers = []string{a.server.Scheme + "://" + a.server.Host}
	}
	var firstErr error
	for _, issuer := range issuers {
		as, err := a.fetchServerMetadata(ctx, issuer)
		if err == nil {
			d.as = as
			return d, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// fetchResourceMetadata returns the server's protected resource metadata,
// nil when none of the well-known locations has one (each answering other
// than 200). A document that is found but does not validate is an error,
// as is a resource_metadata URL from the challenge that does not answer.
func (a *Authorizer) fetchResourceMetadata(ctx context.Context, ch *Challenge) (*ResourceMetadata, error) {
	if u := ch.ResourceMetadata(); u != "" {
		loc, err := url.Parse(u)
		if err != nil || !loc.IsAbs() {
			return nil, a.fail(ErrDiscovery, fmt.Sprintf("the server's resource_metadata %q is not an absolute URL", u), nil)
		}
		if err := a.checkSecure(loc); err != nil {
			return nil, err
		}
		var prm ResourceMetadata
		status, err := a.getJSON(ctx, loc.String(), &prm)
		if err != nil {
			return nil, a.fail(ErrDiscovery, "reading the protected resource metadata at "+loc.String(), err)
		}
		if status != http.StatusOK {
			return nil, a.fail(ErrDiscovery, fmt.Sprintf("the protected resource metadata at %s answered %d", loc, status), nil)
		}
		return &prm, a.checkResourceMetadata(&prm, loc.String())
	}
	for _, loc := range resourceMetadataURLs(a.server) {
		var prm ResourceMetadata
		status, err := a.getJSON(ctx, loc, &prm)
		if err != nil {
			return nil, a.fail(ErrDiscovery, "reading the protected resource metadata at "+loc, err)
		}
		if status == http.StatusOK {
			return &prm, a.checkResourceMetadata(&prm, loc)
		}
	}
	return nil, nil
}

// checkResourceMetadata validates a protected resource metadata document:
// its resource must be this MCP server (the same origin, and a path that
// is the server's or one of its parents: RFC 9728 §3.3, MCP's resource
// mismatch refusal), and it must name an authorization server.
func (a *Authorizer) checkResourceMetadata(prm *ResourceMetadata, from string) error {
	res, err := url.Parse(prm.Resource)
	if prm.Resource == "" || err != nil || !res.IsAbs() || res.Fragment != "" {
		return a.fail(ErrDiscovery, fmt.Sprintf("the protected resource metadata at %s has no valid resource (%q)", from, prm.Resource), nil)
	}
	if !resourceCovers(res, a.server) {
		return a.fail(ErrDiscovery, fmt.Sprintf("resource mismatch: the protected resource metadata at %s is for %s, not for %s", from, prm.Resource, a.server), nil)
	}
	if len(prm.AuthorizationServers) == 0 {
		return a.fail(ErrDiscovery, "the protected resource metadata at "+from+" names no authorization server", nil)
	}
	return nil
}

// fetchServerMetadata reads and validates the metadata of the
// authorization server whose issuer identifier is issuer, trying the
// well-known URLs in the order MCP requires.
func (a *Authorizer) fetchServerMetadata(ctx context.Context, issuer string) (*ServerMetadata, error) {
	iu, err := url.Parse(issuer)
	if err != nil || !iu.IsAbs() || iu.RawQuery != "" || iu.Fragment != "" {
		return nil, a.fail(ErrDiscovery, fmt.Sprintf("the authorization server %q is not a valid issuer identifier", issuer), nil)
	}
	if err := a.checkSecure(iu); err != nil {
		return nil, err
	}
	for _, loc := range serverMetadataURLs(iu) {
		var m ServerMetadata
		status, err := a.getJSON(ctx, loc, &m)
		if err != nil {
			return nil, a.fail(ErrDiscovery, "reading the authorization server metadata at "+loc, err)
		}
		if status != http.StatusOK {
			continue
		}
		// RFC 8414 §3.3, OpenID Connect Discovery §4.3: the issuer must be
		// identical, by simple string comparison, to the one the URL was
		// built from; a document claiming another issuer is not used.
		if m.Issuer != issuer {
			return nil, a.fail(ErrDiscovery, fmt.Sprintf("issuer mismatch: the metadata at %s says issuer %q, not %q", loc, m.Issuer, issuer), nil)
		}
		if err := a.checkServerMetadata(&m, loc); err != nil {
			return nil, err
		}
		return &m, nil
	}
	return nil, a.fail(ErrDiscovery, "no authorization server metadata found for "+issuer+" (tried RFC 8414 and OpenID Connect discovery)", nil)
}

// checkServerMetadata refuses metadata the client cannot use safely.
func (a *Authorizer) checkServerMetadata(m *ServerMetadata, from string) error {
	if m.TokenEndpoint == "" {
		return a.fail(ErrDiscovery, "the authorization server metadata at "+from+" has no token_endpoint", nil)
	}
	if a.cfg.Grant == GrantAuthorizationCode {
		if m.AuthorizationEndpoint == "" {
			return a.fail(ErrDiscovery, "the authorization server metadata at "+from+" has no authorization_endpoint", nil)
		}
		if !m.pkceS256() {
			return a.fail(ErrDiscovery, "the authorization server "+m.Issuer+" does not advertise PKCE S256 (code_challenge_methods_supported), which MCP requires", nil)
		}
	}
	for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.RegistrationEndpoint, m.RevocationEndpoint} {
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil || !u.IsAbs() {
			return a.fail(ErrDiscovery, fmt.Sprintf("the authorization server metadata at %s has an invalid endpoint %q", from, e), nil)
		}
		if err := a.checkSecure(u); err != nil {
			return err
		}
	}
	return nil
}

// checkSecure refuses a plain-HTTP URL outside loopback, unless the
// configuration allows it: OAuth 2.1 §1.5 requires TLS for every
// authorization server endpoint.
func (a *Authorizer) checkSecure(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if a.cfg.AllowInsecureHTTP || isLoopback(u.Hostname()) {
			return nil
		}
		return a.fail(ErrDiscovery, u.String()+" is plain HTTP outside loopback (allow it with AllowInsecureHTTP)", nil)
	}
	return a.fail(ErrDiscovery, u.String()+" is not an http(s) URL", nil)
}

// isLoopback reports whether host names this machine: "localhost" or a
// loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// getJSON GETs loc and decodes a 200 answer into v. Other statuses are
// returned without decoding; a 200 that is not JSON, or is larger than the
// response limit, is an error.
func (a *Authorizer) getJSON(ctx context.Context, loc string, v any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, stripURLError(err) // the caller names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, a.cfg.MaxResponseBytes))
		return resp.StatusCode, nil
	}
	body, err := a.readBody(resp)
	if err != nil {
		return resp.StatusCode, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, errors.New("the answer is not a JSON object")
	}
	return resp.StatusCode, nil
}

// readBody reads a response body of at most the response limit.
func (a *Authorizer) readBody(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, a.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > a.cfg.MaxResponseBytes {
		return nil, fmt.Errorf("the answer is larger than %d bytes (MaxResponseBytes)", a.cfg.MaxResponseBytes)
	}
	return body, nil
}

// resourceMetadataURLs are the well-known locations of a server's
// protected resource metadata, in the order MCP tries them: with the
// server's path inserted (RFC 9728 §3.1), then at the root. A server at
// the root has only the second.
func resourceMetadataURLs(server *url.URL) []string {
	const suffix = "/.well-known/oauth-protected-resource"
	root := server.Scheme + "://" + server.Host + suffix
	path := strings.TrimSuffix(server.EscapedPath(), "/")
	if path == "" {
		return []string{root}
	}
	aware := root + path
	if server.RawQuery != "" {
		aware += "?" + server.RawQuery
	}
	return []string{aware, root}
}

// serverMetadataURLs are the well-known locations of an authorization
// server's metadata, in the order the MCP specification requires: for an
// issuer with a path, RFC 8414 with the path inserted, OpenID Connect with
// the path inserted, OpenID Connect with the path appended; for one
// without, RFC 8414 then OpenID Connect. The issuer's root is never tried
// for an issuer with a path (it would be another issuer's).
func serverMetadataURLs(issuer *url.URL) []string {
	origin := issuer.Scheme + "://" + issuer.Host
	path := strings.TrimSuffix(issuer.EscapedPath(), "/")
	if path == "" {
		return []string{
			origin + "/.well-known/oauth-authorization-server",
			origin + "/.well-known/openid-configuration",
		}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

// resourceCovers reports whether the resource identifier res designates
// the server at u: the same scheme, host and port, and a path equal to
// u's or one of its parents, at a segment boundary.
func resourceCovers(res, u *url.URL) bool {
	if !strings.EqualFold(res.Scheme, u.Scheme) || hostPort(res) != hostPort(u) {
		return false
	}
	rp := strings.TrimSuffix(res.EscapedPath(), "/")
	up := strings.TrimSuffix(u.EscapedPath(), "/")
	return rp == up || strings.HasPrefix(up, rp+"/")
}

// hostPort is u's lowercased host with its port, the scheme's default
// port when it has none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// canonicalResource is the canonical URI of an MCP server (MCP
// authorization, canonical server URI): its URL with a lowercase scheme
// and host and without a fragment.
func canonicalResource(u *url.URL) string {
	c := *u
	c.Scheme = strings.ToLower(c.Scheme)
	c.Host = strings.ToLower(c.Host)
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}
