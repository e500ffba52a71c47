package oauth

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Transport returns the http.RoundTripper a Streamable HTTP client sends
// the MCP server's requests through. It sends each request through base
// (nil: http.DefaultTransport) with the server's token, in the
// Authorization header (RFC 6750 §2.1; "DPoP" with a fresh proof for a
// bound token, RFC 9449 §7.1), and handles the server's answers:
//
//   - 401: the token is renewed (refreshed, or obtained by the client
//     credentials grant or an interactive login) and the request sent
//     again, once; a DPoP use_dpop_nonce challenge is answered with a
//     proof carrying the server's nonce. Without a way to renew, the
//     request fails with ErrLoginRequired.
//   - 403 insufficient_scope: a new authorization is asked for with the
//     challenged scopes added to those held (step-up), at most MaxStepUps
//     times per request and never again for a scope set that it could not
//     obtain (ErrInsufficientScope).
//
// A token is only ever sent to the MCP server's origin: a request to
// another one (a redirect) goes through untouched. A request body without
// GetBody is read into memory to be sent again; set GetBody (as
// http.NewRequest does for in-memory bodies) to avoid that. The errors it
// returns are *Error values (wrapped in *url.Error by http.Client) and
// never contain a token.
func (a *Authorizer) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{a: a, base: base}
}

type transport struct {
	a    *Authorizer
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := t.a
	if origin(req.URL) != origin(a.server) {
		return t.base.RoundTrip(req)
	}
	getBody, err := replayableBody(req)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	tok, err := a.tokenFor(ctx)
	if err != nil {
		return nil, err
	}
	renewed, nonceRetried, stepUps := false, false, 0
	for {
		r := req.Clone(ctx)
		if getBody != nil {
			if r.Body, err = getBody(); err != nil {
				return nil, err
			}
			r.GetBody = getBody
		}
		if tok != nil {
			if err := a.authorize(r, tok); err != nil {
				return nil, err
			}
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		a.noteNonce(resp)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			ch := findChallenge(ParseChallenges(resp.Header), "DPoP", "Bearer")
			discard(resp)
			if tok.isDPoP() && ch.Error() == "use_dpop_nonce" && !nonceRetried && resp.Header.Get("DPoP-Nonce") != "" {
				nonceRetried = true // RFC 9449 §9: sign again with the nonce
				continue
			}
			if renewed {
				return nil, a.fail(ErrRejected, "the server answered 401 to a token just obtained", nil)
			}
			used := ""
			if tok != nil {
				used = tok.AccessToken
			}
			if tok, err = a.renew(ctx, need{used: used, challenge: ch}); err != nil {
				return nil, err
			}
			renewed = true
		case http.StatusForbidden:
			ch := findChallenge(ParseChallenges(resp.Header), "DPoP", "Bearer")
			if tok == nil || ch.Error() != "insufficient_scope" {
				return resp, nil
			}
			discard(resp)
			want := ch.Scope()
			key := scopeKey(want)
			if stepUps >= MaxStepUps || a.isExhausted(key) || hasScopes(tok.Scope, want) {
				// Asking again cannot help: the token has what was
				// challenged, or asking did not get it.
				a.markExhausted(key)
				return nil, a.fail(ErrInsufficientScope, fmt.Sprintf("the server needs scope %q, which the authorization did not obtain", joinScopes(want)), nil)
			}
			stepUps++
			if tok, err = a.renew(ctx, need{used: tok.AccessToken, challenge: ch, stepUp: true}); err != nil {
				return nil, err
			}
		default:
			return resp, nil
		}
	}
}

// authorize puts tok on r: Bearer, or DPoP with a proof for r's method
// and URL, the server's latest nonce and the token's hash.
func (a *Authorizer) authorize(r *http.Request, tok *token) error {
	if !tok.isDPoP() {
		r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		return nil
	}
	a.mu.Lock()
	k, err := a.dpopLocked()
	a.mu.Unlock()
	if err != nil {
		return a.fail(ErrAuthorization, "the DPoP key", err)
	}
	proof, err := k.proof(r.Method, r.URL.String(), tok.AccessToken, a.nonceFor(r.URL), a.now())
	if err != nil {
		return a.fail(ErrAuthorization, "signing a DPoP proof", err)
	}
	r.Header.Set("Authorization", "DPoP "+tok.AccessToken)
	r.Header.Set("DPoP", proof)
	return nil
}

// replayableBody returns what gives req's body again for each attempt,
// nil for a request without one. The original body is closed: RoundTrip
// owns it.
func replayableBody(req *http.Request) (func() (io.ReadCloser, error), error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody != nil {
		req.Body.Close()
		return req.GetBody, nil
	}
	data, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, nil
}

// discard reads a little of a response that is not passed on and closes
// it, so that its connection can be reused.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// scopeKey identifies a challenged scope set whatever its order.
func scopeKey(scopes []string) string {
	s := slices.Clone(scopes)
	slices.Sort(s)
	return strings.Join(s, " ")
}

func (a *Authorizer) isExhausted(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exhausted[key]
}

func (a *Authorizer) markExhausted(key string) {
	a.mu.Lock()
	a.exhausted[key] = true
	a.mu.Unlock()
}
