package oauth

import (
	"context"
	"crypto"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Grant is how tokens are obtained.
type Grant int

const (
	// GrantAuthorizationCode: a person logs in through a browser
	// (authorization code with PKCE, RFC 6749 §4.1 and RFC 7636); the
	// default.
	GrantAuthorizationCode Grant = iota
	// GrantClientCredentials: the client authenticates as itself, with a
	// secret or a private key, and no person is involved (RFC 6749 §4.4,
	// MCP's client credentials extension).
	GrantClientCredentials
)

// ParseGrant reads a grant as configured: "authorization_code" (or "")
// and "client_credentials".
func ParseGrant(s string) (Grant, error) {
	switch s {
	case "", "authorization_code":
		return GrantAuthorizationCode, nil
	case "client_credentials":
		return GrantClientCredentials, nil
	}
	return 0, fmt.Errorf("oauth: grant %q is not authorization_code or client_credentials", s)
}

func (g Grant) String() string {
	if g == GrantClientCredentials {
		return "client_credentials"
	}
	return "authorization_code"
}

// The defaults of Config's zero fields.
const (
	// DefaultRequestTimeout bounds each request to an authorization
	// server or a metadata document.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMaxResponseBytes bounds each metadata, registration and
	// token response.
	DefaultMaxResponseBytes = 1 << 20
	// DefaultLoginTimeout bounds how long an interactive login waits for
	// the browser's redirect.
	DefaultLoginTimeout = 10 * time.Minute
	// DefaultClientName is the client_name of dynamic registrations.
	DefaultClientName = "snodod"
	// MaxStepUps is how many times one request may re-authorize for a
	// 403 insufficient_scope before it fails (MCP: retry a few times,
	// then treat it as a permanent failure).
	MaxStepUps = 2
)

// Config is how an MCP client authorizes to one protected MCP server. The
// zero value of each optional field means its documented default.
type Config struct {
	// Name names the server in errors, logs and the token store (its
	// file is Name.json); it must be a plain file name. Required with a
	// Store.
	Name string
	// ServerURL is the MCP endpoint, the resource the tokens are for.
	// Required.
	ServerURL string
	// Store keeps the tokens and registrations across restarts and
	// processes; nil keeps them in memory.
	Store *Store
	// HTTPClient makes the discovery, registration, token and
	// revocation requests (not the MCP requests, which go through
	// Transport's base): TLS roots, proxy. nil: http.DefaultClient.
	HTTPClient *http.Client

	// ClientID is a pre-registered client; ClientSecret its secret ("":
	// a public client, or one with PrivateKey). ClientIssuer, when set,
	// is the authorization server it is registered with: another one is
	// refused instead of shown this client.
	ClientID     string
	ClientSecret string
	ClientIssuer string
	// ClientMetadataURL is the HTTPS URL of the client's metadata
	// document, used as its client_id with authorization servers that
	// support client ID metadata documents.
	ClientMetadataURL string
	// ClientName is the client_name of dynamic registrations; default
	// DefaultClientName.
	ClientName string
	// Grant is how tokens are obtained; default GrantAuthorizationCode.
	Grant Grant
	// PrivateKey, when set, authenticates the client with a signed
	// assertion (private_key_jwt, RFC 7523) instead of a secret;
	// SigningAlg is its JWS algorithm (default: ES256, ES384, ES512 by
	// curve, RS256 for RSA, EdDSA for Ed25519) and KeyID its kid header.
	PrivateKey crypto.Signer
	SigningAlg string
	KeyID      string
	// DPoP asks for sender-constrained tokens (RFC 9449). Without it,
	// DPoP is still used when the server's challenge or metadata asks for
	// it and its authorization server supports ES256 proofs.
	DPoP bool
	// Scopes are requested on top of those the scope selection strategy
	// chooses (the challenge's, else the resource's scopes_supported).
	Scopes []string
	// RedirectPort is the loopback port logins listen on; 0 picks a free
	// one, reused by the next logins while it is free.
	RedirectPort int
	// AllowInsecureHTTP lets the authorization server and metadata be
	// reached over plain HTTP outside loopback.
	AllowInsecureHTTP bool

	// Interact, when set, is called when a request needs a person to log
	// in: it shows or opens authURL (OpenBrowser, a URL-mode
	// elicitation) and returns; the request then waits, up to
	// LoginTimeout, for the login to complete. Without it such a request
	// fails at once with ErrLoginRequired, and a login is started with
	// BeginLogin.
	Interact func(ctx context.Context, authURL string) error
	// LoginTimeout bounds an interactive login; default
	// DefaultLoginTimeout.
	LoginTimeout time.Duration
	// RequestTimeout bounds each request to an authorization server;
	// default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds each response read from an authorization
	// server or a metadata document; default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Logger receives the authorization's events (discoveries,
	// registrations, refreshes, logins), never a token or a secret. nil:
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.ClientName == "" {
		c.ClientName = DefaultClientName
	}
	if c.LoginTimeout <= 0 {
		c.LoginTimeout = DefaultLoginTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
