package oauth

import (
	"fmt"
	"slices"
	"time"
)

// State is where a server's authorization stands.
type State int

const (
	// StateNone: no token, and the server has not asked for one.
	StateNone State = iota
	// StateOK: a token is held (possibly about to be refreshed).
	StateOK
	// StateLoginRequired: a person must log in; requests fail at once.
	StateLoginRequired
	// StateRefreshFailed: the last refresh failed for a reason that may
	// pass; requests keep the token while it lasts and retry after a
	// pause.
	StateRefreshFailed
)

func (s State) String() string {
	switch s {
	case StateOK:
		return "ok"
	case StateLoginRequired:
		return "login required"
	case StateRefreshFailed:
		return "refresh failed"
	}
	return "none"
}

// Status is a server's authorization as `status` shows it. It holds no
// secret.
type Status struct {
	State State
	// Expiry is the current token's expiry, zero when it has none or
	// there is no token.
	Expiry time.Time
	// Refreshable: the token can be renewed without a person.
	Refreshable bool
	// Reason says why for StateLoginRequired and StateRefreshFailed.
	Reason string
	// Issuer is the authorization server of the current token.
	Issuer string
	// Scopes are the current token's scopes.
	Scopes []string
}

// String is the status as of now: "ok (expires in 52m)", "login
// required", "refresh failed: <reason>".
func (s Status) String() string { return s.Format(time.Now()) }

// Format is the status as of now.
func (s Status) Format(now time.Time) string {
	switch s.State {
	case StateOK:
		if s.Expiry.IsZero() {
			return "ok"
		}
		left := s.Expiry.Sub(now)
		if left <= 0 {
			if s.Refreshable {
				return "ok (expired, renewed at the next request)"
			}
			return "login required (the token expired)"
		}
		return "ok (expires in " + shortDuration(left) + ")"
	case StateRefreshFailed:
		return "refresh failed: " + s.Reason
	case StateLoginRequired:
		return "login required"
	}
	return "none"
}

// shortDuration is d rounded to what a person reads: "45s", "52m",
// "3h5m", "2d4h".
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}

// Status returns the server's authorization state, having noticed a
// login or logout made by another process through the store.
func (a *Authorizer) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reloadLocked()
	tok := a.rec.Token
	st := Status{State: a.state, Reason: a.reason}
	if tok == nil {
		if st.State == StateOK || st.State == StateRefreshFailed {
			st.State = StateNone
		}
		return st
	}
	st.Expiry, st.Issuer, st.Scopes = tok.Expiry, tok.Issuer, slices.Clone(tok.Scope)
	st.Refreshable = tok.RefreshToken != "" || a.cfg.Grant == GrantClientCredentials
	if st.State != StateRefreshFailed {
		st.State, st.Reason = StateOK, ""
	}
	return st
}
