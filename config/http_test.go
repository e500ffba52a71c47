package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHTTPRules(t *testing.T) {
	runRows(t, []row{
		{"http.allowed_hosts", `["mcp.example.com", "mcp.example.com:8443", "[::1]:80", "10.0.0.7"]`, nil},
		{"http.allowed_hosts", `["https://mcp.example.com", "a b", "x:99999", ""]`, []string{
			`http.allowed_hosts: entries must be host names, optionally with :port, got "https://mcp.example.com"`,
			`http.allowed_hosts: entries must be host names, optionally with :port, got "a b"`,
			`http.allowed_hosts: entries must be host names, optionally with :port, got "x:99999"`,
			`http.allowed_hosts: entries must be host names, optionally with :port, got ""`,
		}},
		{"http.node_id", `""`, nil},
		{"http.node_id", `"a1"`, nil},
		{"http.node_id", `"node_2-b"`, nil},
		{"http.node_id", `"a.1"`, []string{`http.node_id: must be empty or 1 to 32 letters, digits, - or _, got "a.1"`}},
		{"http.node_id", `"123456789012345678901234567890123"`, []string{`http.node_id: must be empty or 1 to 32 letters, digits, - or _, got "123456789012345678901234567890123"`}},
		{"http.allow_unauthenticated", `true`, nil},
		{"http.allow_unauthenticated", `"yes"`, []string{`http.allow_unauthenticated: must be true or false, got "yes"`}},
		{"http.listen", `"127.0.0.2:80"`, nil},
		{"http.listen", `"localhost:80"`, nil},
		{"http.listen", `"unix:/run/user/1000/snodod/http.sock"`, nil},
		{"http.listen", `"0.0.0.0:8080"`, []string{`http.listen: a non-loopback address needs http.auth_token_file (a bearer token clients send) or, behind something that authenticates, http.allow_unauthenticated = true; got "0.0.0.0:8080"`}},
		{"http.listen", `"[::]:8080"`, []string{`http.listen: a non-loopback address needs http.auth_token_file (a bearer token clients send) or, behind something that authenticates, http.allow_unauthenticated = true; got "[::]:8080"`}},
	})
}

// A non-loopback listen loads with a token file or the explicit opt-out.
func TestHTTPNonLoopbackListen(t *testing.T) {
	token := writeFile(t, "token", strings.Repeat("t", MinSecretBytes)+"\n")
	for _, extra := range []string{`auth_token_file = "` + token + `"`, `allow_unauthenticated = true`} {
		path := writeFile(t, "config.toml", "[http]\nlisten = \"0.0.0.0:8080\"\n"+extra+"\n")
		c := mustLoad(t, Options{File: path, Env: testEnv(t)})
		if c.HTTP.Listen != "0.0.0.0:8080" {
			t.Fatalf("%s: listen %q", extra, c.HTTP.Listen)
		}
	}
	env := testEnv(t, "SNODOD_HTTP__ALLOW_UNAUTHENTICATED=true", "SNODOD_HTTP__LISTEN=0.0.0.0:1")
	if c := mustLoad(t, Options{Env: env}); !c.HTTP.AllowUnauthenticated {
		t.Fatal("SNODOD_HTTP__ALLOW_UNAUTHENTICATED=true not read")
	}
}

func TestLoopbackListen(t *testing.T) {
	var got []string
	for _, l := range []string{":80", "127.0.0.1:80", "127.9.9.9:80", "[::1]:80", "localhost:80", "unix:/run/h.sock", "0.0.0.0:80", "[::]:80", "10.1.2.3:80", "example.com:80"} {
		if LoopbackListen(l) {
			got = append(got, l)
		}
	}
	if want := []string{":80", "127.0.0.1:80", "127.9.9.9:80", "[::1]:80", "localhost:80", "unix:/run/h.sock"}; !slices.Equal(got, want) {
		t.Fatalf("loopback: %v, want %v", got, want)
	}
}

// http.allow_unauthenticated with a listener loads with a warning that
// says who it lets in; without a listener it says nothing. A unix: path
// has its variables expanded.
func TestHTTPAllowUnauthenticatedWarns(t *testing.T) {
	for _, c := range []struct{ listen, want string }{
		{"127.0.0.1:8080", "http.allow_unauthenticated: is true: every local user can call every tool"},
		{"0.0.0.0:8080", "http.allow_unauthenticated: is true: anyone who can reach 0.0.0.0:8080 can call every tool"},
		{"unix:/run/h.sock", "http.allow_unauthenticated: is true: every local user who can open /run/h.sock can call every tool"},
		{"", ""},
	} {
		path := writeFile(t, "config.toml", fmt.Sprintf("[http]\nlisten = %q\nallow_unauthenticated = true\n", c.listen))
		cfg := mustLoad(t, Options{File: path, Env: testEnv(t)})
		var got []string
		for _, w := range cfg.Warnings() {
			got = append(got, w.String())
		}
		if c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.want)) {
			t.Errorf("listen %q: warnings %q, want one starting %q", c.listen, got, c.want)
		}
	}
	path := writeFile(t, "config.toml", "[http]\nlisten = \"unix:${XDG_RUNTIME_DIR}/snodod/http.sock\"\n")
	if cfg := mustLoad(t, Options{File: path, Env: testEnv(t)}); cfg.HTTP.Listen != "unix:/run/test/snodod/http.sock" {
		t.Errorf("listen %q, want the variable expanded", cfg.HTTP.Listen)
	}
	// One dialect: a shell's $NAME is not expanded there either.
	path = writeFile(t, "config.toml", "[http]\nlisten = \"unix:$XDG_RUNTIME_DIR/snodod/http.sock\"\n")
	_, err := Load(Options{File: path, Env: testEnv(t)})
	want := `http.listen: writes $XDG_RUNTIME_DIR, which is not expanded: write ${XDG_RUNTIME_DIR}, got "unix:$XDG_RUNTIME_DIR/snodod/http.sock"`
	if got := problemLines(t, err); !slices.Equal(got, []string{want}) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// admin.listen takes loopback addresses and Unix sockets only
// (docs/observability.md, "The admin listener").
func TestAdminListen(t *testing.T) {
	const refused = `admin.listen: must be a loopback address (127.0.0.1:PORT, [::1]:PORT, :PORT) or unix:PATH: the admin listener serves this machine only; got `
	runRows(t, []row{
		{"admin.listen", `""`, nil},
		{"admin.listen", `":9464"`, nil},
		{"admin.listen", `"127.0.0.1:9464"`, nil},
		{"admin.listen", `"[::1]:9464"`, nil},
		{"admin.listen", `"localhost:9464"`, nil},
		{"admin.listen", `"unix:/run/user/1000/snodod/admin.sock"`, nil},
		{"admin.listen", `"0.0.0.0:9464"`, []string{refused + `"0.0.0.0:9464"`}},
		{"admin.listen", `"[::]:9464"`, []string{refused + `"[::]:9464"`}},
		{"admin.listen", `"10.0.0.7:9464"`, []string{refused + `"10.0.0.7:9464"`}},
		{"admin.listen", `"unix:run/admin.sock"`, []string{`admin.listen: must be empty, a loopback host:port (such as "127.0.0.1:9464" or ":9464"), or unix: and an absolute path of at most 107 bytes, got "unix:run/admin.sock"`}},
	})
}

// [audit] goes to one of a file and journald, and the file's path is
// absolute once expanded (docs/observability.md, "Audit log").
func TestAuditKeys(t *testing.T) {
	runRows(t, []row{
		{"audit.file", `""`, nil},
		{"audit.file", `"/var/log/snodod/audit.log"`, nil},
		{"audit.file", `"audit.log"`, []string{`audit.file: must be an absolute path, got "audit.log"`}},
		{"audit.journald", `true`, nil},
	})
	path := writeFile(t, "config.toml", "[audit]\nfile = \"${HOME}/audit.log\"\njournald = true\n")
	_, err := Load(Options{File: path, Env: testEnv(t)})
	if got := problemLines(t, err); len(got) != 1 || !strings.HasPrefix(got[0], `audit.journald: must be false when audit.file is set`) {
		t.Errorf("file and journald: %q", got)
	}
	path = writeFile(t, "config.toml", "[audit]\nfile = \"${HOME}/audit.log\"\n")
	c, err := Load(Options{File: path, Env: testEnv(t)})
	if err != nil || !filepath.IsAbs(c.Audit.File) || strings.Contains(c.Audit.File, "$") || !c.Audit.On() {
		t.Errorf("audit.file with ${HOME}: %q, %v", c.Audit.File, err)
	}
}

// SecretValues has the secrets the audit log redacts: the key and token
// files' contents, secret-looking env values, remote headers.
func TestSecretValues(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Config{Server: Server{StateKeyFile: key}, MCPServers: []Upstream{
		{Name: "a", Program: Program{Env: map[string]string{"GITHUB_TOKEN": "ghp_abcdefghijklmnop", "LANG": "C.UTF-8", "API_KEY": "abc"}}},
		{Name: "b", Remote: &Remote{Headers: map[string]string{"Authorization": "Bearer tok-123456789"}}},
	}}
	got := c.SecretValues()
	want := []string{"Bearer tok-123456789", strings.Repeat("k", 40), "ghp_abcdefghijklmnop", "tok-123456789"}
	slices.SortFunc(want, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	if !slices.Equal(got, want) {
		t.Errorf("SecretValues = %q, want %q (API_KEY's abc is too short, LANG no secret)", got, want)
	}
}
