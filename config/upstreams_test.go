package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
)

// loadServers loads a TOML file holding content and returns the entries.
func loadServers(t *testing.T, content string, env ...string) *Config {
	t.Helper()
	return mustLoad(t, Options{File: writeFile(t, "config.toml", content), Env: testEnv(t, env...)})
}

// serverProblems loads content (TOML) and returns its problem lines.
func serverProblems(t *testing.T, content string, env ...string) []string {
	t.Helper()
	_, err := Load(Options{File: writeFile(t, "config.toml", content), Env: testEnv(t, env...)})
	if err == nil {
		t.Fatalf("Load accepted:\n%s", content)
	}
	return problemLines(t, err)
}

func TestUpstreamDefaults(t *testing.T) {
	c := loadServers(t, "[mcpServers.Memory_Server]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory@2026.8.31\"]\n")
	if len(c.MCPServers) != 1 {
		t.Fatalf("entries = %+v", c.MCPServers)
	}
	u := c.MCPServers[0]
	u.written, u.Source = nil, Source{}
	want := Upstream{
		Name: "Memory_Server", Program: Program{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory@2026.8.31"},
			Env: map[string]string{}, InheritEnv: InheritEnv{Names: DefaultInheritEnv}}, Prefix: "memory-server", Share: "all", MaxInstances: 8,
		Start: "lazy", StartTimeout: 120 * time.Second, RequestTimeout: 10 * time.Minute, IdleTimeout: 30 * time.Minute,
		Protocol: "auto", Restart: Restart{MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: time.Minute, ResetAfter: 5 * time.Minute},
		PingInterval: 30 * time.Second, PinNew: "hold", Sandbox: sandbox.Policy{Level: UnsetSandboxLevel},
	}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("entry:\n got %+v\nwant %+v", u, want)
	}
	if c.Upstream("Memory_Server") == nil || c.Upstream("other") != nil {
		t.Error("Upstream(name) does not find the entry by name")
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("warnings = %v, want none", c.Warnings())
	}
}

// TestUpstreamClientJSON loads a Claude Desktop block pasted unchanged.
func TestUpstreamClientJSON(t *testing.T) {
	path := writeFile(t, "config.json", `{"mcpServers": {
  "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/tmp"],
         "env": {"A": "1"}, "disabled": false, "type": "stdio", "alwaysAllow": ["read_file"], "timeout": 90}
}}`)
	c := mustLoad(t, Options{File: path, Env: testEnv(t)})
	u := c.Upstream("fs")
	if u == nil || u.RequestTimeout != 90*time.Second || u.Env["A"] != "1" || u.Disabled {
		t.Fatalf("entry = %+v", u)
	}
	// type = "stdio" is the transport snodod hosts: used, not ignored.
	want := []string{"mcpServers.fs: ignored client keys alwaysAllow: snodod does not use them"}
	if got := warningLines(c); !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func warningLines(c *Config) []string {
	var out []string
	for _, w := range c.Warnings() {
		out = append(out, w.String())
	}
	return out
}

// TestUpstreamProblems lists every problem of several entries at once.
func TestUpstreamProblems(t *testing.T) {
	got := serverProblems(t, `
[mcpServers.a]
comand = "npx"
[mcpServers.b]
command = "npx -y server-b"
share = "everyone"
max_instances = 0
start_timeout = 30
idle_timeout = "-1s"
prefix = "B_x"
protocol = "2024-11-05"
[mcpServers.c]
command = "x"
args = "one"
disabled = true
enabled = true
timeout = 5
request_timeout = "5s"
tools = 3
restart = { max_attempts = 0, initial_delay = "2m", max_delay = "1m", jitter = 1 }
[mcpServers.d]
command = "x"
url = "https://example.com/mcp"
[mcpServers."bad name"]
command = "x"
[mcpServers.e]
command = "x"
env = { K = 3 }
tools = { include = ["a["], excluded = ["x"] }
inherit_env = "all"
roots = ["https://example.com"]
`)
	want := []string{
		`mcpServers."bad name": must be named with 1 to 64 letters, digits, ".", "_" or "-" (it is used on command lines: snodod connect NAME), got "bad name"`,
		`unknown key "mcpServers.a.comand"; did you mean "mcpServers.a.command"?`,
		`mcpServers.a.command: is required: the program to run, such as "npx" (with args = […]), or the program and its arguments, such as ["rg", "--", "{{pattern}}"]`,
		`mcpServers.b.command: must be the program alone (it is never run through a shell), got "npx -y server-b"; write command = "npx" and args = ["-y", "server-b"]`,
		`mcpServers.b.idle_timeout: must be a positive duration, or "0s" for never, got "-1s"`,
		`mcpServers.b.max_instances: must be a positive integer, got 0`,
		`mcpServers.b.prefix: must be 1 to 16 of a-z, 0-9 and "-" (no "_": the first "__" of a name splits prefix from name), got "B_x"`,
		`mcpServers.b.protocol: must be "auto", "2025-06-18", "2025-11-25" or "2026-07-28", got "2024-11-05"`,
		`mcpServers.b.share: must be "all", "cwd" or "session", got "everyone"`,
		`mcpServers.b.start_timeout: must be a positive duration with a unit, such as "30s", got 30`,
		`mcpServers.c.args: must be a list of strings, got "one"`,
		`mcpServers.c.enabled: contradicts disabled = true; keep one of them`,
		`mcpServers.c.restart.max_attempts: must be a positive integer, got 0`,
		`unknown key "mcpServers.c.restart.jitter"`,
		`mcpServers.c.restart.max_delay: must not be shorter than restart.initial_delay ("2m"), got "1m"`,
		`mcpServers.c.timeout: is an alias of request_timeout; keep one of them`,
		`mcpServers.c.tools: must be a list of globs (include) or a table {include = [globs], exclude = [globs]}, got 3`,
		`mcpServers.d.command: is a field of a server snodod starts; a remote server (url) has none: remove it, or remove url`,
		`mcpServers.e.env.K: must be a string, got a number`,
		`mcpServers.e.inherit_env: must be true (every variable), false (none) or a list of variable names (a trailing * matches a prefix), got "all"`,
		`mcpServers.e.roots: entries must be paths or file:// URIs, got "https://example.com"`,
		`unknown key "mcpServers.e.tools.excluded"; did you mean "mcpServers.e.tools.exclude"?`,
		`mcpServers.e.tools.include: entries must be globs (*, ?, [a-z]), got "a["`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\n\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUpstreamFields(t *testing.T) {
	c := loadServers(t, `
[mcpServers.browser]
command = "/usr/bin/browser"
share = "session"
max_instances = 4
start = "eager"
idle_timeout = "0s"
ping_interval = "0s"
protocol = "2026-07-28"
enabled = false
prefix = "web"
tools = ["nav_*", "click"]
resources = { exclude = ["file:///secret/*"] }
inherit_env = ["PATH", "NODE_*"]
roots = ["~/notes", "file:///srv/data", "rel"]
restart = { max_attempts = 2, reset_after = "10m" }
`)
	u := c.Upstream("browser")
	switch {
	case u.Share != "session" || u.MaxInstances != 4 || u.Start != "eager" || u.IdleTimeout != 0 || u.PingInterval != 0:
		t.Errorf("share/start/timeouts: %+v", u)
	case u.Protocol != "2026-07-28" || !u.Disabled || u.Prefix != "web":
		t.Errorf("protocol/disabled/prefix: %+v", u)
	case !reflect.DeepEqual(u.Tools, Filter{Include: []string{"nav_*", "click"}}):
		t.Errorf("tools = %+v", u.Tools)
	case u.Restart != (Restart{MaxAttempts: 2, InitialDelay: time.Second, MaxDelay: time.Minute, ResetAfter: 10 * time.Minute}):
		t.Errorf("restart = %+v", u.Restart)
	case !u.InheritEnv.Allows("NODE_OPTIONS") || u.InheritEnv.Allows("HOME"):
		t.Errorf("inherit_env = %+v", u.InheritEnv)
	case !u.Tools.Allows("nav_back") || u.Tools.Allows("type") || u.Resources.Allows("file:///secret/x") || !u.Resources.Allows("file:///x"):
		t.Errorf("filters do not select as written")
	}
	dir := filepath.Dir(c.File())
	if len(u.Roots) != 3 || !strings.HasSuffix(u.Roots[0], "/notes") || u.Roots[1] != "file:///srv/data" || u.Roots[2] != "file://"+filepath.Join(dir, "rel") {
		t.Errorf("roots = %v", u.Roots)
	}
}

func TestUpstreamExpansions(t *testing.T) {
	secret := writeFile(t, "secrets/token", "  s3cret\n")
	c := loadServers(t, `
[mcpServers.gh]
command = "${BIN:-npx}"
args = ["--dir", "${client.cwd}/src", "$$HOME", "a$b"]
share = "cwd"
env = { TOKEN = "${file:`+secret+`}", USER_NAME = "${WHO}", EMPTY = "${UNSET:-fallback}", CWD = "${client.cwd}" }
`, "WHO=me")
	u := c.Upstream("gh")
	if u.Command != "npx" || !slices.Equal(u.Args, []string{"--dir", "${client.cwd}/src", "$HOME", "a$b"}) {
		t.Errorf("command %q args %q", u.Command, u.Args)
	}
	if u.Env["TOKEN"] != "s3cret" || u.Env["USER_NAME"] != "me" || u.Env["EMPTY"] != "fallback" {
		t.Errorf("env expanded wrongly (values not shown)")
	}
	if !u.UsesClientCwd() {
		t.Error("UsesClientCwd() = false")
	}
	r := u.Render("/home/me/proj", "/home/me", []string{"PATH=/bin", "SECRET_OTHER=x", "LC_ALL=C"})
	if r.Args[1] != "/home/me/proj/src" || r.Dir != "/home/me/proj" {
		t.Errorf("rendered args %q dir %q", r.Args, r.Dir)
	}
	wantEnv := []string{"CWD=/home/me/proj", "EMPTY=fallback", "LC_ALL=C", "PATH=/bin", "TOKEN=s3cret", "USER_NAME=me"}
	if !slices.Equal(r.Env, wantEnv) {
		t.Errorf("rendered env %q, want %q", r.Env, wantEnv)
	}

	got := serverProblems(t, `
[mcpServers.x]
command = "x"
args = ["${NOPE}", "${env:HOME}", "${file:/nonexistent/secret}", "${open"]
[mcpServers.y]
command = "${file:/etc/hostname}"
roots = ["${file:/etc/hostname}"]
env_file = "${client.cwd}/.env"
`)
	want := []string{
		`mcpServers.x.args: uses ${NOPE}, which is not set in the daemon's environment; set it, or write ${NOPE:-default}`,
		`mcpServers.x.args: uses ${env:HOME}, a client's syntax (VS Code, Cursor); snodod writes it ${HOME}`,
		`mcpServers.x.args: uses ${file:/nonexistent/secret} in args, which every local user can read (a process's command line is in /proc/PID/cmdline); pass the secret in env instead, env = { NAME = "${file:/nonexistent/secret}" }, for the program to read there`,
		`mcpServers.x.args: has an unterminated ${ (write $$ for a literal $)`,
		`mcpServers.y.command: uses ${file:/etc/hostname} in command, which every local user can read (a process's command line is in /proc/PID/cmdline); pass the secret in env instead, env = { NAME = "${file:/etc/hostname}" }, for the program to read there`,
		`mcpServers.y.env_file: cannot use ${client.cwd}: the file is read when the configuration loads, once for every client; give its path`,
		`mcpServers.y.roots: uses ${file:/etc/hostname} in roots, a path that status and logs show: only env values may hold a secret, env = { NAME = "${file:/etc/hostname}" }`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUpstreamSecretsNotPrinted checks that config print shows a
// ${file:…} secret by its path (so that the output loads back with it),
// a literal that looks like a secret as <set>, and plain values as they
// are.
func TestUpstreamSecretsNotPrinted(t *testing.T) {
	secret := writeFile(t, "token", "s3cret-value")
	c := loadServers(t, "[mcpServers.\"a.b\"]\ncommand = \"x\"\nenv = { TOKEN = \"literal-s3cret-value\", FROM_FILE = \"${file:"+secret+"}\", MODE = \"fast\" }\n")
	var text, js bytes.Buffer
	if err := c.Print(&text); err != nil {
		t.Fatal(err)
	}
	if err := c.PrintJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), js.String()} {
		if strings.Contains(out, "s3cret-value") {
			t.Errorf("a secret is printed:\n%s", out)
		}
		if !strings.Contains(out, `.env.TOKEN`) || !strings.Contains(out, `<set>`) || !strings.Contains(out, "${file:"+secret+"}") {
			t.Errorf("print lacks the entry's lines:\n%s", out)
		}
	}
	for _, want := range []string{`mcpServers."a.b".env.TOKEN = "<set>"`, `mcpServers."a.b".env.FROM_FILE = "${file:` + secret + `}"`, `mcpServers."a.b".env.MODE = "fast"`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("print lacks %s:\n%s", want, text.String())
		}
	}
	// What print writes loads back, the ${file:…} secret with it.
	back := mustLoad(t, Options{File: writeFile(t, "printed.toml", text.String()), Env: testEnv(t)})
	if u := back.Upstream("a.b"); u == nil || u.Env["TOKEN"] != secretShown || u.Env["FROM_FILE"] != "s3cret-value" || u.Env["MODE"] != "fast" {
		t.Errorf("printed configuration does not load back: %+v", u)
	}
}

func TestUpstreamWarnings(t *testing.T) {
	c := loadServers(t, `
[mcpServers.a]
command = "npx"
args = ["@modelcontextprotocol/server-memory"]
[mcpServers.b]
command = "uvx"
args = ["mcp-server-fetch"]
[mcpServers.c]
command = "npx"
args = ["-y", "@scope/pkg@1.0.0", "${client.cwd}"]
[mcpServers.d]
command = "uvx"
args = ["mcp-server-git==1.2"]
`)
	want := []string{
		`mcpServers.a.args: runs npx without -y: npx waits for a confirmation nobody can give; add "-y"`,
		`mcpServers.a.args: runs npx "@modelcontextprotocol/server-memory" without a version: every start may fetch a different release; pin it ("@modelcontextprotocol/server-memory@1.2.3")`,
		`mcpServers.b.args: runs uvx "mcp-server-fetch" without a version: every start may fetch a different release; pin it ("mcp-server-fetch==1.2.3")`,
		`mcpServers.c.share: uses ${client.cwd} with share = "all": one instance serves every client, started in $HOME; set share = "cwd" or "session"`,
	}
	if got := warningLines(c); !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUpstreamPrefixCollision(t *testing.T) {
	got := serverProblems(t, "[mcpServers.GitHub]\ncommand = \"x\"\n[mcpServers.github]\ncommand = \"y\"\n")
	want := []string{`mcpServers.github.prefix: must differ from the prefix of mcpServers.GitHub, got "github"; set prefix to tell them apart`}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	long := loadServers(t, "[mcpServers.a-very-long-server-name]\ncommand = \"x\"\n")
	if p := long.Upstream("a-very-long-server-name").Prefix; p != "a-very-long-serv" {
		t.Errorf("default prefix of a long name = %q, want its first 16 characters", p)
	}
}

func TestUpstreamImport(t *testing.T) {
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude_desktop_config.json")
	writeAt(t, claude, `{"mcpServers": {
		"memory": {"command": "npx", "args": ["-y", "m@1.0.0"]},
		"fs": {"command": "imported-fs"},
		"remote": {"url": "https://example.com/mcp"}
	}}`)
	vscode := filepath.Join(dir, "mcp.json")
	writeAt(t, vscode, `{"servers": {"memory": {"command": "later"}, "git": {"type": "stdio", "command": "uvx", "args": ["g==1"]}}}`)
	cfg := filepath.Join(dir, "config.toml")
	writeAt(t, cfg, `[upstreams]
import = ["claude_desktop_config.json", "`+vscode+`", "~/absent.json"]
[mcpServers.fs]
command = "own-fs"
`)
	c := mustLoad(t, Options{File: cfg, Env: testEnv(t)})
	var names []string
	for _, u := range c.MCPServers {
		names = append(names, u.Name)
	}
	if !slices.Equal(names, []string{"fs", "git", "memory", "remote"}) {
		t.Fatalf("entries %v, want fs git memory remote", names)
	}
	if u := c.Upstream("remote"); u.Remote == nil || u.Remote.URL != "https://example.com/mcp" || u.Remote.SSE || !u.Imported {
		t.Errorf("the imported remote server: %+v", u)
	}
	if u := c.Upstream("fs"); u.Command != "own-fs" || u.Imported {
		t.Errorf("snodod's own entry must win: %+v", u)
	}
	if u := c.Upstream("memory"); u.Command != "npx" || !u.Imported || u.Source.Name != claude {
		t.Errorf("the earlier import must win: %+v", u)
	}
	w := strings.Join(warningLines(c), "\n")
	for _, want := range []string{
		"upstreams.import: names ", "absent.json, which does not exist; it is skipped",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings:\n%s\nlack %q", w, want)
		}
	}
	// An imported entry snodod cannot host is skipped with a warning: the
	// rest of the configuration loads.
	bad := filepath.Join(dir, "bad.json")
	writeAt(t, bad, `{"mcpServers": {"x": {"command": 3}, "y": {"command": "y"}}}`)
	writeAt(t, cfg, "[upstreams]\nimport = [\""+bad+"\"]\n")
	c = mustLoad(t, Options{File: cfg, Env: testEnv(t)})
	want := `mcpServers.x.command: must be the program (a string, with args) or the program and its arguments (a list of strings), got 3; the entry is skipped (imported from ` + bad + `)`
	if got := warningLines(c); !slices.Equal(got, []string{want}) || len(c.MCPServers) != 1 || c.MCPServers[0].Name != "y" {
		t.Errorf("warnings %q, want %q; entries %v, want y alone", got, want, c.MCPServers)
	}
}

// TestUpstreamCommandOnPath is config check's PATH resolution: a problem
// in Inspect, nothing in Load.
func TestUpstreamCommandOnPath(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "my-server")
	writeAt(t, prog, "#!/bin/sh\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	content := "[mcpServers.ok]\ncommand = \"my-server\"\nenv = { PATH = \"" + dir + "\" }\n[mcpServers.missing]\ncommand = \"no-such-program\"\nenv = { PATH = \"" + dir + "\" }\n"
	path := writeFile(t, "config.toml", content)
	if _, err := Load(Options{File: path, Env: testEnv(t)}); err != nil {
		t.Fatalf("Load refused a command it does not check: %v", err)
	}
	_, err := Inspect(path)
	want := `mcpServers.missing.command: "no-such-program" is not found on the child's PATH (` + dir +
		`); install it, or give its absolute path (a daemon started by systemd has a shorter PATH than a login shell)`
	if got := problemLines(t, err); !slices.Equal(got, []string{want}) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// TestDocsUpstreamsExample loads the mcpServers examples of
// docs/config.md: the started servers' and the remote servers'.
func TestDocsUpstreamsExample(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	examples := fenced(string(b), "toml mcpServers")
	if len(examples) != 2 {
		t.Fatalf("found %d mcpServers examples, want 2", len(examples))
	}
	home := t.TempDir()
	for _, f := range []string{"secrets/github", "secrets/linear", "secrets/corp"} {
		writeAt(t, filepath.Join(home, ".config", "snodod", f), "ghp_example\n")
	}
	env := []string{"HOME=" + home, "XDG_RUNTIME_DIR=/run/test", "XDG_CONFIG_HOME=" + t.TempDir()}
	c := mustLoad(t, Options{File: writeFile(t, "config.toml", examples[0]), Env: env})
	if gh := c.Upstream("github"); gh == nil || gh.Prefix != "gh" || gh.Tools.Allows("delete_repo") {
		t.Errorf("github entry %+v", gh)
	}
	if b := c.Upstream("browser"); b == nil || b.Share != "session" || b.MaxInstances != 4 {
		t.Errorf("browser entry %+v", b)
	}
	c = mustLoad(t, Options{File: writeFile(t, "config.toml", examples[1]), Env: env})
	if l := c.Upstream("linear"); l == nil || l.Remote == nil || !l.Remote.SSE || l.Remote.Headers["Authorization"] != "ghp_example" {
		t.Errorf("linear entry %+v", l)
	}
	if i := c.Upstream("internal"); i == nil || i.Remote == nil || i.Remote.OAuth.Grant != "client_credentials" || i.Remote.TLSCAFile == "" {
		t.Errorf("internal entry %+v", i)
	}
	if w := warningLines(c); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
}
