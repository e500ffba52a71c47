// Package oauth is the OAuth client of an MCP client: everything it needs to
// authorize to a protected remote MCP server as the authorization parts of
// the MCP specifications of 2025-11-25 and 2026-07-28 describe, and the
// client-credentials and DPoP extensions.
//
// An Authorizer holds one server's authorization. Its Transport is the
// http.RoundTripper a Streamable HTTP client sends that server's requests
// through: it adds the token and, on a 401, finds out how to get one —
// the WWW-Authenticate challenge (resource_metadata, scope, error), the
// protected resource metadata (RFC 9728, at the challenge's URL, else the
// path-aware then the root well-known URL), the authorization server's
// metadata (RFC 8414, then OpenID Connect discovery, with MCP's path
// insertion order), the client's identity (a pre-registered client ID with
// client_secret_basic, client_secret_post, none or private_key_jwt as the
// server supports; else a client ID metadata document URL; else dynamic
// registration, RFC 7591) — then refreshes the token, requests one with
// the client credentials grant, or runs an authorization-code login with
// PKCE S256, state, the resource parameter (RFC 8707) and a loopback
// redirect on 127.0.0.1 (RFC 8252), checking iss (RFC 9207). A 403
// insufficient_scope gets a step-up authorization with the union of the
// scopes held and challenged, a bounded number of times. DPoP (RFC 9449)
// binds tokens to a key when configured or asked for, with the servers'
// nonces honoured.
//
// The package refuses what the specification says to refuse: protected
// resource metadata for another resource, authorization server metadata
// claiming another issuer, an authorization server without PKCE S256,
// plain-HTTP endpoints outside loopback, an authorization response whose
// iss is wrong or missing when promised, and client credentials shown to
// an authorization server other than the one that issued them.
//
// Tokens live in a Store (one file per server, mode 0600, replaced
// atomically) or, without one, in memory. Concurrent requests needing a new
// token cause one renewal; a refresh the authorization server refuses puts
// the server in the login-required state (Status) instead of being retried
// in a loop. No token, secret or authorization code ever appears in an
// error, a log record or a Status.
//
// It uses golang.org/x/oauth2 for the PKCE verifier and challenge and the
// authorization URL, and does the token endpoint requests itself: they
// carry the resource parameter on refreshes, DPoP proofs with nonce
// retries and private_key_jwt assertions, which x/oauth2 cannot add, and
// its errors quote response bodies, which these must not.
//
// The package knows HTTP and OAuth, not MCP: it never reads or writes an
// MCP message, and imports nothing of snodod's.
package oauth
