package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A remote server's entry: every field, expanded; the hosted-server
// fields it shares with a started one apply.
func TestRemoteEntry(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "token"), "Bearer s3cret-token-value\n")
	writeAt(t, filepath.Join(dir, "ca.pem"), "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	c := loadServers(t, `
[mcpServers.gh]
url = "https://api.example.com/mcp?tenant=${TENANT}"
headers = { Authorization = "${file:`+dir+`/token}", X-Team = "blue", X-Api-Key = "literal-key-0123456789abcdef" }
timeout = 90
prefix = "gh"
share = "session"
start = "eager"
idle_timeout = "5m"
tools = { exclude = ["delete_*"] }
restart = { max_attempts = 3 }
tls_ca_file = "`+dir+`/ca.pem"
oauth = { client_id = "snodod-cli", client_secret_file = "`+dir+`/token", scopes = ["repo", "read:org"], dpop = true, redirect_port = 8976 }
[mcpServers.legacy]
type = "sse"
url = "http://127.0.0.1:3001/sse"
[mcpServers.windsurf]
serverUrl = "https://windsurf.example.com/mcp"
[mcpServers.cc]
type = "streamable-http"
url = "http://localhost:8080/mcp"
[mcpServers.lan]
url = "http://192.168.1.20/mcp"
allow_insecure_http = true
[mcpServers.m2m]
url = "https://m2m.example.com/mcp"
oauth = { grant = "client_credentials", client_id = "svc", private_key_file = "`+dir+`/ca.pem", signing_alg = "ES256" }
`, "TENANT=acme")
	gh := c.Upstream("gh")
	if gh == nil || gh.Remote == nil {
		t.Fatalf("gh: %+v", gh)
	}
	r := gh.Remote
	if r.URL != "https://api.example.com/mcp?tenant=acme" || r.SSE || r.Headers["Authorization"] != "Bearer s3cret-token-value" || r.Headers["X-Team"] != "blue" {
		t.Errorf("gh remote: %+v", r)
	}
	if r.TLSCAFile != filepath.Join(dir, "ca.pem") {
		t.Errorf("tls_ca_file %q", r.TLSCAFile)
	}
	o := r.OAuth
	if o.ClientID != "snodod-cli" || o.ClientSecretFile != filepath.Join(dir, "token") || !slices.Equal(o.Scopes, []string{"repo", "read:org"}) || !o.DPoP || o.RedirectPort != 8976 || o.Grant != "authorization_code" {
		t.Errorf("gh oauth: %+v", o)
	}
	if gh.RequestTimeout != 90*time.Second || gh.Prefix != "gh" || gh.Share != "session" || gh.Start != "eager" || gh.IdleTimeout != 5*time.Minute || gh.Restart.MaxAttempts != 3 || gh.Tools.Allows("delete_repo") {
		t.Errorf("gh hosted fields: %+v", gh)
	}
	if gh.Command != "" || len(gh.Args) != 0 {
		t.Errorf("a remote server has a program: %+v", gh.Program)
	}
	if l := c.Upstream("legacy"); l.Remote == nil || !l.Remote.SSE || l.Remote.URL != "http://127.0.0.1:3001/sse" {
		t.Errorf("legacy: %+v", l.Remote)
	}
	if w := c.Upstream("windsurf"); w.Remote == nil || w.Remote.URL != "https://windsurf.example.com/mcp" {
		t.Errorf("windsurf's serverUrl: %+v", w.Remote)
	}
	if cc := c.Upstream("cc"); cc.Remote == nil || cc.Remote.SSE {
		t.Errorf("streamable-http: %+v", cc.Remote)
	}
	if lan := c.Upstream("lan"); lan.Remote == nil || !lan.Remote.AllowInsecureHTTP {
		t.Errorf("lan: %+v", lan.Remote)
	}
	if m := c.Upstream("m2m"); m.Remote.OAuth.Grant != "client_credentials" || m.Remote.OAuth.PrivateKeyFile == "" {
		t.Errorf("m2m: %+v", m.Remote.OAuth)
	}

	// config print: secrets as <set> or by their file, never their value.
	var printed strings.Builder
	if err := c.Print(&printed); err != nil {
		t.Fatal(err)
	}
	out := printed.String()
	for _, want := range []string{
		`mcpServers.gh.headers.Authorization = "${file:` + dir + `/token}"`,
		`mcpServers.gh.headers.X-Api-Key = "<set>"`,
		`mcpServers.gh.headers.X-Team = "blue"`,
		`mcpServers.gh.url = "https://api.example.com/mcp?tenant=${TENANT}"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config print lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "literal-key") {
		t.Errorf("config print shows a secret:\n%s", out)
	}
}

// A URL's query value that looks like a secret is shown <set>.
func TestRemotePrintQuery(t *testing.T) {
	c := loadServers(t, "[mcpServers.q]\nurl = \"https://x.example.com/sse?api_key=abcdef0123456789abcdef&mode=full\"\ntype = \"sse\"\n")
	var printed strings.Builder
	if err := c.Print(&printed); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(printed.String(), `mcpServers.q.url = "https://x.example.com/sse?api_key=<set>&mode=full"`) {
		t.Errorf("config print:\n%s", printed.String())
	}
}

// Every problem of remote entries, at once.
func TestRemoteProblems(t *testing.T) {
	got := serverProblems(t, `
[mcpServers.a]
url = "https://example.com/mcp"
command = "npx"
args = ["x"]
env = { A = "b" }
cwd = "/tmp"
share = "cwd"
[mcpServers.b]
url = "http://example.com/mcp"
[mcpServers.c]
url = "ftp://example.com/mcp"
[mcpServers.d]
type = "http"
[mcpServers.e]
url = "https://user:pw@example.com/mcp"
[mcpServers.f]
url = "https://example.com/mcp"
headers = { Mcp-Session-Id = "x", "bad name" = "y", X-Ok = 3, X-Nl = "a\nb" }
[mcpServers.g]
url = "https://example.com/mcp"
oauth = { grant = "client_credentials", client_metadata_url = "http://example.com/c.json", redirect_port = 70000, scopes = ["a b"] }
[mcpServers.h]
url = "https://example.com/mcp"
oauth = { client_id = "x", client_secret_file = "/s", private_key_file = "/k" }
[mcpServers.i]
command = "x"
headers = { A = "b" }
oauth = { client_id = "x" }
[mcpServers.j]
url = "https://example.com/mcp?k=${file:/secret}"
[mcpServers.k]
url = "https://example.com/mcp"
type = "stdio"
[mcpServers.l]
url = "https://example.com/mcp"
serverUrl = "https://example.com/mcp"
`)
	want := []string{
		`mcpServers.a.args: is a field of a server snodod starts; a remote server (url) has none: remove it, or remove url`,
		`mcpServers.a.command: is a field of a server snodod starts; a remote server (url) has none: remove it, or remove url`,
		`mcpServers.a.cwd: is a field of a server snodod starts; a remote server (url) has none: remove it, or remove url`,
		`mcpServers.a.env: is a field of a server snodod starts; a remote server (url) has none: remove it, or remove url`,
		`mcpServers.a.share: must be "all" or "session" for a remote server (url): it has no working directory, got "cwd"`,
		`mcpServers.b.url: uses http:// to example.com, which is not loopback: the traffic (tokens included) would be readable on the way; use https, or set allow_insecure_http = true`,
		`mcpServers.c.url: must be an https (or http) URL, got the scheme "ftp"`,
		`mcpServers.d.url: is required with type = "http": the remote server's URL, such as "https://example.com/mcp"`,
		`mcpServers.e.url: must not carry a user or password (they would be shown and logged): put credentials in headers, such as headers = { Authorization = "${file:~/.secrets/token}" }`,
		`mcpServers.f.headers."bad name": is not a header name: use letters, digits and -`,
		`mcpServers.f.headers.Mcp-Session-Id: is set by snodod itself on every request; remove it`,
		`mcpServers.f.headers.X-Nl: must be one line: a header value holds no line break`,
		`mcpServers.f.headers.X-Ok: must be a string, got a number`,
		`mcpServers.g.oauth.client_metadata_url: must be an https URL with a path (the client's metadata document, which is its client_id), got "http://example.com/c.json"`,
		`mcpServers.g.oauth.grant: "client_credentials" needs client_id and client_secret_file or private_key_file: the client authenticates as itself`,
		`mcpServers.g.oauth.redirect_port: must be a port, 1 to 65535, or 0 for any free one, got 70000`,
		`mcpServers.g.oauth.scopes: entries must be scope names, without spaces or quotes, got "a b"`,
		`mcpServers.h.oauth.private_key_file: is another way of authenticating the client than client_secret_file; keep one of them`,
		`mcpServers.i.headers: is a field of a remote server; add its url, or remove it`,
		`mcpServers.i.oauth: is a field of a remote server; add its url, or remove it`,
		`mcpServers.j.url: uses ${file:/secret} in url, which status and logs show: only env and headers values may hold a secret, headers = { NAME = "${file:/secret}" }`,
		`mcpServers.k.type: must be "http" or "sse" with url ("stdio" is a server snodod starts), got "stdio"`,
		`mcpServers.l.serverUrl: is another spelling of url; keep one of them`,
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// config check reads the files a remote entry names: a CA file that is
// missing or holds no certificate, a secret that cannot be read.
func TestRemoteCheck(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "bad.pem"), "not a certificate")
	path := filepath.Join(dir, "config.toml")
	writeAt(t, path, `
[mcpServers.a]
url = "https://example.com/mcp"
tls_ca_file = "bad.pem"
oauth = { client_id = "x", client_secret_file = "missing" }
[mcpServers.b]
url = "https://example.com/mcp"
tls_ca_file = "none.pem"
`)
	var lines []string
	if err := Check(path); err != nil {
		lines = problemLines(t, err)
	}
	want := []string{
		"mcpServers.a.oauth.client_secret_file: cannot read " + filepath.Join(dir, "missing") + ": no such file or directory",
		"mcpServers.a.tls_ca_file: " + filepath.Join(dir, "bad.pem") + " holds no PEM certificate",
		"mcpServers.b.tls_ca_file: cannot read " + filepath.Join(dir, "none.pem") + ": no such file or directory",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("config check:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// Load itself does not read them: the daemon reports what fails when
	// it connects.
	if _, err := Load(Options{File: path, Env: testEnv(t)}); err != nil {
		t.Errorf("Load: %v", err)
	}
	_ = os.Remove(path)
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "app.localhost": true, "127.0.0.1": true, "127.8.9.1": true, "::1": true, "[::1]": true,
		"example.com": false, "10.0.0.1": false, "localhost.example.com": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v", host, got)
		}
	}
}
