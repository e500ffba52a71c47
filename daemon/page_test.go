package daemon

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// The status page on the admin listener, without JavaScript: it lists
// the session, and its end button (a form POST with the CSRF token, from
// the page's origin) ends it, as snodod kill does; without the token,
// or from another origin, it is refused and the session lives on.
func TestStatusPageEndsSession(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"admin.listen": "127.0.0.1:0"}), Options{})
	addr := r.d.adminAddr()
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	own := clientDialing(t, (&net.Dialer{}).DialContext)
	status, body := get(t, own, "http://"+addr+"/")
	if status != 200 || !strings.Contains(body, `<tr data-session="1">`) {
		t.Fatalf("/: %d %.3000s", status, body)
	}
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field in %.3000s", body)
	}
	post := func(csrf, origin string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/sessions/1/kill", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := own.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post("0000", "http://"+addr); status != 403 || !strings.Contains(body, "no valid csrf token") {
		t.Errorf("without the CSRF token: %d %.300s", status, body)
	}
	if status, body := post(m[1], "http://127.0.0.1:1"); status != 403 || !strings.Contains(body, "another origin") {
		t.Errorf("from another origin: %d %.300s", status, body)
	}
	if n := len(r.d.Status().Sessions); n != 1 {
		t.Fatalf("%d sessions after the refusals, want 1", n)
	}
	if status, body := post(m[1], "http://"+addr); status != 200 || !strings.Contains(body, "end session 1: done") {
		t.Errorf("the end button: %d %.300s", status, body)
	}
	eventually.True(t, "the session ended", func() bool { return len(r.d.Status().Sessions) == 0 })
	c.eof()
}

// Another local user's browser gives the admin token once, as ?token=,
// and gets a cookie that stands for it (HttpOnly, SameSite=Strict, not
// the token itself) and a redirect without it; the cookie then serves
// the page, a forged one or a wrong token does not.
func TestStatusPageTokenCookie(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a socket of another uid needs root")
	}
	const nobody = 65534
	dir := shortDir(t)
	token := strings.Repeat("k", 40)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, testConfig(t, dir, map[string]any{"admin.listen": "127.0.0.1:0", "admin.auth_token_file": tokenFile}), Options{})
	base := "http://" + r.d.adminAddr()
	other := clientDialing(t, dialAsUID(nobody))
	other.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if status, _ := get(t, other, base+"/"); status != 401 {
		t.Errorf("uid %d without the token: %d, want 401", nobody, status)
	}
	if status, _ := get(t, other, base+"/?token="+strings.Repeat("x", 40)); status != 401 {
		t.Errorf("a wrong token: %d, want 401", status)
	}
	resp, err := other.Get(base + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" || len(cookies) != 1 {
		t.Fatalf("the token exchange: %s, Location %q, cookies %v", resp.Status, resp.Header.Get("Location"), cookies)
	}
	c := cookies[0]
	if c.Name != "snodod_admin" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, token) {
		t.Errorf("the cookie: %+v; want HttpOnly, SameSite=Strict, not the token", c)
	}
	if status, body := get(t, other, base+"/", "Cookie", c.Name+"="+c.Value); status != 200 || !strings.Contains(body, `id="servers"`) {
		t.Errorf("with the cookie: %d %.300s", status, body)
	}
	if status, _ := get(t, other, base+"/", "Cookie", c.Name+"="+strings.Repeat("0", len(c.Value))); status != 401 {
		t.Errorf("a forged cookie: %d, want 401", status)
	}
}
