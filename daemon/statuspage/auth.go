package statuspage

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// A browser cannot send the admin listener's bearer token itself, so the
// page takes it once, as ?token=, and answers with a cookie (HttpOnly,
// SameSite=Strict) that stands for it; Credentials turns that cookie, on
// each later request, back into the Authorization header the admin
// listener's gate judges. The gate stays the one authority: a peer it
// serves without a token (the daemon's uid, daemon.allowed_uids) needs
// no cookie, and a cookie is only made for the right token.
//
// Every POST carries a CSRF token, derived from a secret of the process,
// and must come from the page's own origin (Origin, else
// Sec-Fetch-Site): a page of another origin cannot make the browser act
// with its cookie or its user's uid, even one on another loopback port,
// which SameSite counts as the same site.

// CookieName is the cookie standing for the admin token.
const CookieName = "snodod_admin"

// mac is the secret's HMAC of what.
func (p *Page) mac(what string) string {
	m := hmac.New(sha256.New, p.secret)
	m.Write([]byte(what))
	return hex.EncodeToString(m.Sum(nil))
}

func (p *Page) cookieValue() string { return p.mac("cookie\x00" + p.o.Token) }

// CSRF is the token every POST's form must carry (the "csrf" field).
func (p *Page) CSRF() string { return p.mac("csrf") }

// Credentials serves next with the admin token of a request's cookie, or
// of its ?token=, in the Authorization header, where the gate in next
// looks for it. It goes in front of the gate.
func (p *Page) Credentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.o.Token != "" && r.Header.Get("Authorization") == "" {
			if t := r.URL.Query().Get("token"); t != "" {
				r.Header.Set("Authorization", "Bearer "+t)
			} else if c, err := r.Cookie(CookieName); err == nil && hmac.Equal([]byte(c.Value), []byte(p.cookieValue())) {
				r.Header.Set("Authorization", "Bearer "+p.o.Token)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// exchangeToken answers a request with ?token= (which the gate let
// through): the right token gets the cookie; either way the browser is
// sent to the same page without it, so that the token stays out of its
// history. It reports whether it answered.
func (p *Page) exchangeToken(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	t := q.Get("token")
	if t == "" {
		return false
	}
	if p.o.Token != "" && subtle.ConstantTimeCompare([]byte(t), []byte(p.o.Token)) == 1 {
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: p.cookieValue(), Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
	}
	q.Del("token")
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
	return true
}

// checkPost refuses a POST that is not the page's own: without the CSRF
// token, or from another origin. It returns the refusal's words, "" to
// serve it.
func (p *Page) checkPost(r *http.Request) string {
	if origin := r.Header.Get("Origin"); origin != "" {
		if !sameOrigin(origin, r.Host) {
			return "refused: a request from " + origin + ", another origin than the status page's; use the page itself"
		}
	} else if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "refused: a " + site + " request; use the status page itself"
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(p.CSRF())) {
		return "refused: the form has no valid csrf token (a page of this daemon process carries it; reload the status page)"
	}
	return ""
}

// sameOrigin reports whether origin is the page's own: http and the
// request's Host (the admin listener serves plain HTTP on loopback).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && host != "" && strings.EqualFold(u.Host, host)
}
