package statuspage

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The page's buttons: each POST is admitted once (admit: the CSRF field,
// the origin, the owner for approve and login, a known server) and runs
// what the command line's control op runs.

// act runs an action of a POST, after the CSRF and origin checks: done,
// the page with its message (and the live stream told at once); refused
// or failed, the page with the reason and a 403 or 409.
func (p *Page) act(w http.ResponseWriter, r *http.Request, what string, do func() error) {
	p.actOn(w, r, action{what: what}, func() (string, error) { return "done", do() })
}

// action is what actOn checks before it runs one: its words, the hosted
// server it acts on ("" for none: one unknown is 404), and whether only
// the daemon's own user or the admin token may run it.
type action struct {
	what, server string
	// ownerOnly, when not "", is why only the daemon's user may.
	ownerOnly string
}

// actOn is act for an action that says what it did (its message follows
// the action's words).
func (p *Page) actOn(w http.ResponseWriter, r *http.Request, a action, do func() (string, error)) {
	if !p.admit(w, r, a) {
		return
	}
	msg, err := do()
	p.hub.wantNow()
	if err != nil {
		p.page(w, http.StatusConflict, a.what+": "+err.Error(), true)
		return
	}
	p.page(w, http.StatusOK, a.what+": "+msg, false)
}

// admit checks an action's POST before it runs: checkPost, who asks for
// an action of the daemon's user alone, and that its server exists. A
// refusal is answered (403, 404) and logged, and admit is false.
func (p *Page) admit(w http.ResponseWriter, r *http.Request, a action) bool {
	refusal := p.checkPost(r)
	if refusal == "" && a.ownerOnly != "" && !p.owner(r) {
		refusal = "refused: only the daemon's own user, or a request with the admin token (admin.auth_token_file), may " + a.what + ", as on the control socket: " + a.ownerOnly
	}
	if refusal != "" {
		p.o.Log.Warn("status page action refused", "action", a.what, "reason", refusal)
		p.page(w, http.StatusForbidden, refusal, true)
		return false
	}
	if a.server != "" && !p.known(a.server) {
		p.page(w, http.StatusNotFound, a.what+": "+unknownServer(a.server), true)
		return false
	}
	p.o.Log.Info("status page action", "action", a.what)
	return true
}

// owner reports whether r is the daemon's own user's (Options.Owner) or
// carries the admin token (as a bearer header, or as the cookie
// Credentials turned into one).
func (p *Page) owner(r *http.Request) bool {
	if p.o.Owner != nil && p.o.Owner(r) {
		return true
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return p.o.Token != "" && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(p.o.Token)) == 1
}

// known reports whether the daemon hosts a server called name (status
// has a row for every configured one).
func (p *Page) known(name string) bool {
	for _, u := range p.o.Status().Upstreams {
		if u.Name == name {
			return true
		}
	}
	return false
}

func unknownServer(name string) string {
	return fmt.Sprintf("no hosted server is called %q; the page lists them (snodod status)", name)
}

func (p *Page) serveRestart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p.actOn(w, r, action{what: "restart " + name, server: name}, func() (string, error) {
		if p.o.Restart == nil {
			return "", errNoAction
		}
		return "done", p.o.Restart(name)
	})
}

// serveApprove is POST /servers/{name}/approve: `snodod approve NAME
// [TOOL]`, the form's tool field for TOOL.
func (p *Page) serveApprove(w http.ResponseWriter, r *http.Request) {
	name, tool := r.PathValue("name"), r.PostFormValue("tool")
	what := "approve " + name
	if tool != "" {
		what += " " + tool
	}
	p.actOn(w, r, action{what: what, server: name, ownerOnly: "every session sees what a server says"}, func() (string, error) {
		if p.o.Approve == nil {
			return "", errNoAction
		}
		approved, released, err := p.o.Approve(name, tool)
		switch {
		case err != nil:
			return "", err
		case len(approved) == 0 && !released:
			return "nothing of " + name + " awaited approval", nil
		}
		var said []string
		if released {
			said = append(said, "its quarantine ended")
		}
		if len(approved) > 0 {
			said = append(said, "approved "+strings.Join(approved, ", "))
		}
		return strings.Join(said, "; "), nil
	})
}

// serveLogin is POST /servers/{name}/login: `snodod login NAME`, the
// browser sent on to the authorization URL. Not by a redirect: the
// page's form-action 'self' (its Content-Security-Policy) covers the
// redirects of a form's navigation too, and Chromium stops one to
// another origin; a page that refreshes to the URL at once (and links
// to it) is a navigation of its own. The authorization server's redirect
// comes back to the daemon's loopback listener, which completes the
// login, and the status page shows the new authorization at its next
// snapshot.
func (p *Page) serveLogin(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a := action{what: "log in to " + name, server: name, ownerOnly: "the tokens are its user's"}
	if !p.admit(w, r, a) {
		return
	}
	if p.o.Login == nil {
		p.page(w, http.StatusConflict, a.what+": "+errNoAction.Error(), true)
		return
	}
	raw, err := p.o.Login(name)
	if err == nil {
		err = webURL(raw)
	}
	if err != nil {
		p.page(w, http.StatusConflict, a.what+": "+err.Error(), true)
		return
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "login", loginView{Name: name, URL: raw}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

// loginView is what the login page shows: where it sends the browser.
type loginView struct{ Name, URL string }

// webURL refuses an authorization URL that is not http or https (an
// authorization server's metadata names it).
func webURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("the authorization URL %q is not an http or https URL", raw)
	}
	return nil
}

// serveDiff is GET /servers/{name}/diff: `snodod diff NAME`, with the
// approve buttons of what is held.
func (p *Page) serveDiff(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !p.known(name) {
		p.page(w, http.StatusNotFound, "diff "+name+": "+unknownServer(name), true)
		return
	}
	dv := diffView{Name: name, CSRF: p.CSRF()}
	if p.o.Diff == nil {
		dv.Text = errNoAction.Error()
	} else if text, err := p.o.Diff(name); err != nil {
		dv.Text, dv.Error = err.Error(), true
	} else {
		dv.Text = text
	}
	for _, u := range p.o.Status().Upstreams {
		if u.Name == name {
			dv.Held = heldOf(u)
			break
		}
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "diff", dv); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

// diffView is what the diff page shows.
type diffView struct {
	Name, Text, CSRF string
	Error            bool
	Held             *held
}

func (p *Page) serveKill(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	p.act(w, r, "end session "+raw, func() error {
		id, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a session id", raw)
		}
		if p.o.Kill == nil {
			return errNoAction
		}
		return p.o.Kill(id)
	})
}
