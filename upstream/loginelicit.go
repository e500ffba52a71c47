package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/snodod/snodod/mcpclient/oauth"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// A login asked of the client (docs/upstreams.md §9, "Login through the
// client"): a request to a remote server that needs a person to log in,
// from a client that declared URL-mode elicitation, gets an
// elicitation/create of mode "url" with the authorization URL instead of
// the error naming snodod login. The login is the daemon's, as snodod
// login's is (its loopback listener takes the browser's redirect): one
// login at a time per server, shared by every request that needs it, so
// that ten clients calling at once are all shown the same URL and one
// visit serves them all. A legacy client's request waits for the login
// (up to oauth.DefaultLoginTimeout), is told notifications/elicitation/
// complete, and goes on; a 2026 client gets input_required carrying the
// elicitation, and its retry waits for the login and re-sends the call.
// A client without the capability, or one that declines, gets the error
// naming snodod login NAME. Nothing of another server is touched.

// elicitedLogin is one login begun for requests: its URL and id as the
// clients are shown them, and its outcome.
type elicitedLogin struct {
	id   string // the elicitationId
	url  string
	done chan struct{} // closed when the login ended: err is its outcome
	err  error
	once sync.Once
	stop context.CancelFunc // ends the wait for the redirect
}

// end records the login's outcome, once.
func (el *elicitedLogin) end(err error) {
	el.once.Do(func() {
		el.err = err
		close(el.done)
		el.stop()
	})
}

// elicitedLoginOf returns the login in progress for u's requests,
// beginning one when there is none (discovery, registration, the
// loopback listener: bounded by loginSetup). The login ends when the
// browser's redirect completes it, when a snodod login completes another
// (LoggedIn), at oauth.DefaultLoginTimeout, or when the manager stops.
func (u *upstream) elicitedLoginOf(ctx context.Context) (*elicitedLogin, error) {
	r, err := u.remoteOf()
	if err != nil {
		return nil, err
	}
	r.loginMu.Lock()
	defer r.loginMu.Unlock()
	if r.elicited != nil {
		return r.elicited, nil
	}
	setup, cancel := context.WithTimeout(ctx, loginSetup)
	login, err := r.authz.BeginLogin(setup)
	cancel()
	if err != nil {
		return nil, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	wait, stop := context.WithTimeout(context.Background(), oauth.DefaultLoginTimeout)
	el := &elicitedLogin{id: "snodod-login-" + hex.EncodeToString(b[:]), url: login.URL, done: make(chan struct{}), stop: stop}
	r.elicited = el
	u.m.log.Info("login asked of the client", "upstream", u.name)
	go func() {
		defer login.Close()
		go func() {
			select {
			case <-u.m.done:
				el.end(errors.New("the daemon is shutting down"))
			case <-el.done:
			}
		}()
		_, err := login.Wait(wait)
		r.loginMu.Lock()
		if r.elicited == el {
			r.elicited = nil
		}
		r.loginMu.Unlock()
		if err == nil {
			u.m.LoggedIn(u.name) // its instances start, then the waiting requests go on
		} else {
			u.m.log.Warn("login asked of the client ended without a login", "upstream", u.name, "err", err)
		}
		el.end(err) // a no-op when it ended otherwise
	}()
	return el, nil
}

// loginDone ends the login in progress for u's requests as completed: a
// login done otherwise (snodod login) serves the requests waiting for
// it.
func (r *remote) loginDone() {
	r.loginMu.Lock()
	el := r.elicited
	r.elicited = nil
	r.loginMu.Unlock()
	if el != nil {
		el.end(nil)
	}
}

// needsLogin reports whether err is the failure of a request to a remote
// server that needs a person to log in.
func needsLogin(err error) bool {
	var f *failure
	return errors.As(err, &f) && f.login
}

// maxLogins bounds the logins one request asks of its client: a login,
// then a step-up to more scopes, then one more (as oauth.MaxStepUps
// bounds the step-ups of one HTTP request).
const maxLogins = 3

// loginSetup bounds the first step of a login asked of a client:
// discovery and registration.
const loginSetup = time.Minute

// elicitParams are the params of the elicitation/create that shows a
// login's URL.
type elicitParams struct {
	Mode          string `json:"mode"`
	Message       string `json:"message"`
	URL           string `json:"url"`
	ElicitationID string `json:"elicitationId"`
}

func (u *upstream) loginMessage() string {
	return fmt.Sprintf("%s needs you to sign in: open this page to authorize snodod (one login serves every client of snodod).", u.name)
}

// loginFailure is the failure of a request whose login through the client
// did not happen: the error naming snodod login, with why.
func (u *upstream) loginFailure(orig error, why string) error {
	var f *failure
	if !errors.As(orig, &f) {
		return orig
	}
	g := *f
	g.message = loginHint(u.name) + " (" + why + ")"
	return &g
}

// requester sends a request to the client of the request under way:
// server.RequestClient in a relay handler, server.RequestClientBefore
// before the runtime dispatched it.
type requester func(ctx context.Context, method string, params any) (json.RawMessage, error)

// loginThroughLegacy asks a legacy client (through ask) to open the
// login's URL, waits for the login, and tells the client it completed:
// nil when the request can be sent again; otherwise orig with why it was
// not.
func (u *upstream) loginThroughLegacy(ctx context.Context, orig error, ask requester) error {
	el, err := u.elicitedLoginOf(ctx)
	if err != nil {
		return u.loginFailure(orig, "the login could not begin: "+err.Error())
	}
	raw, err := ask(ctx, "elicitation/create", elicitParams{Mode: "url", Message: u.loginMessage(), URL: el.url, ElicitationID: el.id})
	if err != nil {
		return u.loginFailure(orig, "the client could not be asked to open the login's URL: "+err.Error())
	}
	var res struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(raw, &res) != nil || res.Action != "accept" {
		return u.loginFailure(orig, "the client did not accept to open the login's URL")
	}
	if err := u.awaitLogin(ctx, el); err != nil {
		return u.loginFailure(orig, err.Error())
	}
	_ = server.NotifyRequest(ctx, "notifications/elicitation/complete", map[string]string{"elicitationId": el.id})
	return nil
}

// awaitLogin waits for el to end, the request's deadline extended to
// the login's bound plus a call's.
func (u *upstream) awaitLogin(ctx context.Context, el *elicitedLogin) error {
	// A person's visit: no CPU of the daemon's is used while it waits.
	executor.ExtendDeadline(ctx, oauth.DefaultLoginTimeout+relayDeadline(u.conf()))
	executor.Detach(ctx)
	select {
	case <-el.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if el.err != nil {
		return fmt.Errorf("the login failed: %w", el.err)
	}
	return nil
}

// loginThrough2026 answers a 2026 client's request that needs a login:
// input_required with the elicitation of the login's URL, and a state
// whose retry waits for the login and re-sends the call. Outside the
// methods that may ask for input, orig as it is.
func (u *upstream) loginThrough2026(ctx context.Context, method string, orig error) (*server.RawResult, error) {
	if !mayAskInput(method) {
		return nil, orig
	}
	el, err := u.elicitedLoginOf(ctx)
	if err != nil {
		return nil, u.loginFailure(orig, "the login could not begin: "+err.Error())
	}
	p, _ := json.Marshal(elicitParams{Mode: "url", Message: u.loginMessage(), URL: el.url, ElicitationID: el.id})
	asks, _ := json.Marshal(map[string]any{"login": map[string]any{"method": "elicitation/create", "params": json.RawMessage(p)}})
	state, _ := json.Marshal(envelope{Upstream: u.name, Resend: true, Login: el.id})
	return &server.RawResult{InputRequests: asks, State: state}, nil
}

// loginRetried is what a 2026 retry after a login's elicitation does
// before the call is sent again: the client's answer read, the login
// waited for (the one in progress, when it is still the one shown).
func (u *upstream) loginRetried(ctx context.Context, req *server.RawRequest, id string) error {
	var answer struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(req.InputResponses["login"], &answer) != nil || answer.Action != "accept" {
		return &protocol.Error{Code: CodeUnavailable, Message: loginHint(u.name) + " (the client did not accept to open the login's URL)"}
	}
	r, err := u.remoteOf()
	if err != nil {
		return &protocol.Error{Code: CodeUnavailable, Message: fmt.Sprintf("snodod: upstream %q: %s", u.name, err)}
	}
	r.loginMu.Lock()
	el := r.elicited
	r.loginMu.Unlock()
	if el == nil || el.id != id {
		return nil // it ended: the call tells whether it succeeded
	}
	if err := u.awaitLogin(ctx, el); err != nil {
		return &protocol.Error{Code: CodeUnavailable, Message: loginHint(u.name) + " (" + err.Error() + ")"}
	}
	return nil
}
