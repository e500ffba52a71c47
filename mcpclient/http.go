package mcpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/snodod/snodod/mcpclient/oauth"
)

// HTTP is the transport of a remote MCP server, over HTTP, in the era the
// Conn's handshake finds (docs/upstreams.md §9):
//
//   - 2026-07-28: every request is a POST of its own, stateless, with the
//     MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param headers;
//     the answer is JSON, or an SSE stream of progress then the answer;
//     cancelling a request closes its stream.
//   - 2025-11-25, 2025-06-18 and 2025-03-26 (Streamable HTTP): initialize
//     opens a session (Mcp-Session-Id), after which a GET stream carries
//     what the server sends on its own; an SSE answer cut before its end
//     is resumed with Last-Event-ID after the server's retry delay; a 404
//     for the session (the server expired it) opens a new one,
//     transparently for the requests that follow (those in flight on the
//     old session fail saying so); cancelling is notifications/cancelled;
//     closing the stream deletes the session.
//   - 2024-11-05 (HTTP+SSE), with SSE set or when the server answers
//     initialize 400, 404 or 405 and a GET of URL opens an SSE stream whose
//     first event is endpoint: messages are POSTed to the endpoint and
//     every answer comes on the stream.
//
// An HTTP is a description: each Open connects anew. Its fields are read
// only.
type HTTP struct {
	// URL is the MCP endpoint (the SSE endpoint with SSE).
	URL string
	// SSE says the server speaks only the HTTP+SSE transport of 2024-11-05
	// (type = "sse").
	SSE bool
	// Header is added to every request to the server (the configured
	// headers). Its values are secrets: nothing logs them.
	Header http.Header
	// Client sends the requests: its Transport decides TLS, proxies,
	// connection reuse and authorization (NewHTTPTransport, an
	// oauth.Authorizer's Transport over it). nil is a client over
	// NewHTTPTransport's defaults. Its Timeout must be 0: a request's
	// stream lasts as long as its call, bounded by the call's context.
	Client *http.Client
}

// The waits of a remote stream, not worth settings: how long a session's
// DELETE may take when the stream closes, how long to wait for a
// resumption when the server named no retry delay, how many resumptions
// in a row may bring nothing before the request fails, and the longest a
// broken GET stream waits before it is opened again.
const (
	deleteTimeout    = 5 * time.Second
	defaultRetry     = time.Second
	maxResumes       = 5
	maxListenBackoff = 30 * time.Second
)

// RemoteError is a request a remote server did not answer with a JSON-RPC
// message, while the connection stays usable: an HTTP status (Status), or
// an authorization that failed (Err, an *oauth.Error: errors.Is with
// oauth.ErrLoginRequired tells a login is needed). Message says what
// happened in words that name the server's URL, never a secret.
type RemoteError struct {
	URL     string // the server's URL, its query left out
	Status  int    // the HTTP status, 0 for an authorization failure
	Message string
	Err     error
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns Err.
func (e *RemoteError) Unwrap() error { return e.Err }

// LoginRequired reports whether the request failed because a person must
// log in to the server first.
func (e *RemoteError) LoginRequired() bool { return errors.Is(e.Err, oauth.ErrLoginRequired) }

// NewHTTPTransport returns the base transport of remote servers: TLS with
// the system's roots plus those of caFile (PEM, when not ""), the proxy
// of HTTPS_PROXY, HTTP_PROXY and NO_PROXY, HTTP/2 where the server offers
// it, and kept-alive connections reused by every request to one server.
// The error names caFile when it cannot be read or holds no certificate.
func NewHTTPTransport(caFile string) (*http.Transport, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca_file %s holds no PEM certificate", caFile)
		}
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          100,
		// Calls to one server run in parallel (upstreams.max_in_flight):
		// over HTTP/1.1 each needs its own connection, kept for the next.
		MaxIdleConnsPerHost: 64,
	}, nil
}

// Open connects: for the 2024-11-05 transport (SSE), the GET stream and
// its endpoint event, within ctx; otherwise nothing yet (the first request
// is the first exchange).
func (t HTTP) Open(ctx context.Context, l Link) (Stream, error) {
	u, err := url.Parse(t.URL)
	if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("upstream %q: %q is not an http or https URL", l.Options.Name, RedactURL(t.URL))
	}
	s := newHTTPStream(t, u, l)
	if t.SSE {
		if err := s.openSSE(ctx); err != nil {
			s.end(err)
			<-s.done
			return nil, err
		}
	}
	return s, nil
}

// RedactURL is u as logs, errors and status show it: without its user
// information and with the values of its query replaced by "…" (a URL may
// carry an API key there).
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an invalid URL)"
	}
	p.User = nil
	if p.RawQuery != "" {
		q := p.Query()
		names := make([]string, 0, len(q))
		for k := range q {
			names = append(names, url.QueryEscape(k)+"=…")
		}
		slices.Sort(names)
		p.RawQuery = strings.Join(names, "&")
	}
	p.Fragment = ""
	s := p.String()
	return strings.ReplaceAll(s, "=%E2%80%A6", "=…")
}
