package oauth

import (
	"errors"
	"fmt"
)

// The sentinel errors an Authorizer's failures match with errors.Is. Every
// error the package returns is an *Error (or wraps one) carrying one of
// them; none of them ever holds an access token, a refresh token, a client
// secret or an authorization code.
var (
	// ErrLoginRequired: a person must log in (no token, or a refresh the
	// authorization server refused) and no Interact hook was configured,
	// or the server is in the login-required state already.
	ErrLoginRequired = errors.New("login required")
	// ErrRefreshFailed: the authorization server could not be reached or
	// answered garbage while refreshing; the login itself is still good
	// and the next request tries again after a short pause.
	ErrRefreshFailed = errors.New("refresh failed")
	// ErrInsufficientScope: the server kept answering 403
	// insufficient_scope after the step-up attempts allowed.
	ErrInsufficientScope = errors.New("insufficient scope")
	// ErrRejected: the MCP server answered 401 to a token just obtained.
	ErrRejected = errors.New("token rejected")
	// ErrDiscovery: the protected resource metadata or the authorization
	// server metadata could not be found or did not validate (resource
	// mismatch, issuer mismatch, no PKCE S256, insecure endpoint).
	ErrDiscovery = errors.New("discovery failed")
	// ErrRegistration: no client identity could be used with the
	// authorization server (no pre-registered client, no CIMD support and
	// no registration endpoint), or the registration failed.
	ErrRegistration = errors.New("client registration failed")
	// ErrAuthorization: the authorization response was refused (state or
	// iss mismatch, missing iss, the server's error) or the code could
	// not be exchanged.
	ErrAuthorization = errors.New("authorization failed")
)

// Error is a failure of one server's authorization. Server names it (the
// Config's Name, else its ServerURL), Kind is one of the sentinel errors
// above, Reason says what happened in words a person can act on, and Err,
// when set, is the underlying cause (a network error, a *TokenError).
type Error struct {
	Server string
	Kind   error
	Reason string
	Err    error
}

func (e *Error) Error() string {
	msg := "oauth " + e.Server + ": " + e.Kind.Error()
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns both the kind and the cause, so that errors.Is matches
// either.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// TokenError is an OAuth error response of the token, registration or
// revocation endpoint (RFC 6749 §5.2, RFC 7591 §3.2.2): its error code and
// description, never the response body, which is not echoed anywhere.
type TokenError struct {
	Status      int    // the HTTP status
	Code        string // "invalid_grant", "invalid_client", ...
	Description string
}

func (e *TokenError) Error() string {
	s := fmt.Sprintf("%d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}
