package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/sandbox"
)

// TestSandboxLevels: a configuration written for the sandbox (a [sandbox]
// table, or no file) gets standard; a file without the table, written
// before it, keeps its children unconfined; a remote server has none; an
// exec tool is off unless [sandbox] names a level (or the tool its own).
func TestSandboxLevels(t *testing.T) {
	if c := mustLoad(t, Options{Env: testEnv(t)}); c.Sandbox.Level != sandbox.Standard {
		t.Errorf("no file: level %q, want standard", c.Sandbox.Level)
	}
	const servers = `
[mcpServers.local]
command = "/bin/cat"
[mcpServers.remote]
url = "https://example.com/mcp"
[tools.t]
command = ["/bin/echo"]
`
	for _, tc := range []struct {
		name, content string
		want, tool    sandbox.Level
	}{
		{"no table", servers, sandbox.Off, sandbox.Off},
		{"empty table", "[sandbox]\n" + servers, sandbox.Standard, sandbox.Off},
		{"standard", "[sandbox]\nlevel = \"standard\"\n" + servers, sandbox.Standard, sandbox.Standard},
		{"strict", "[sandbox]\nlevel = \"strict\"\n" + servers, sandbox.Strict, sandbox.Strict},
		{"the tool's own", "[sandbox]\n" + servers + "sandbox = \"strict\"\n", sandbox.Standard, sandbox.Strict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadServers(t, tc.content)
			if c.Sandbox.Level != tc.want {
				t.Errorf("[sandbox] level %q, want %q", c.Sandbox.Level, tc.want)
			}
			if got := c.Upstream("local").Sandbox.Level; got != tc.want {
				t.Errorf("local server: level %q, want %q", got, tc.want)
			}
			if got := c.Tools[0].Sandbox.Level; got != tc.tool {
				t.Errorf("tool: level %q, want %q", got, tc.tool)
			}
			if got := c.Upstream("remote").Sandbox.Level; got != sandbox.Off {
				t.Errorf("remote server: level %q, want off", got)
			}
		})
	}
}

// TestSandboxOverlay: an entry's sandbox changes only the fields it gives,
// a limit at a time; its paths are resolved as entries' paths are.
func TestSandboxOverlay(t *testing.T) {
	home := t.TempDir()
	c := loadServers(t, `
[sandbox]
network = "loopback"
required = true
paths = ["/srv/shared"]
limits = { memory = "2GiB", processes = 64 }

[mcpServers.plain]
command = "/bin/cat"

[mcpServers.level]
command = "/bin/cat"
sandbox = "strict"

[mcpServers.own]
command = "/bin/cat"
sandbox = { paths = ["~/notes", "data", "${NOTES}/x"], read_only = ["~/ref"], network = ["example.com:443", 8080, ":22"], limits = { open_files = 100, memory = "unlimited" } }

[tools.t]
command = ["/bin/echo"]
sandbox = { level = "off", required = false }
`, "HOME="+home, "NOTES=/n")
	dir := filepath.Dir(c.File())
	base := sandbox.Policy{Level: sandbox.Standard, Required: true, Network: sandbox.Network{Mode: sandbox.NetworkLoopback},
		Paths: []string{"/srv/shared"}, Limits: sandbox.Limits{MemoryBytes: 2 << 30, Processes: 64}}
	if !reflect.DeepEqual(c.Sandbox, base) {
		t.Errorf("[sandbox]:\n got %+v\nwant %+v", c.Sandbox, base)
	}
	if got := c.Upstream("plain").Sandbox; !reflect.DeepEqual(got, base) {
		t.Errorf("plain:\n got %+v\nwant %+v", got, base)
	}
	level := base
	level.Level = sandbox.Strict
	if got := c.Upstream("level").Sandbox; !reflect.DeepEqual(got, level) {
		t.Errorf("level:\n got %+v\nwant %+v", got, level)
	}
	own := base
	own.Paths = []string{filepath.Join(home, "notes"), filepath.Join(dir, "data"), "/n/x"}
	own.ReadOnly = []string{filepath.Join(home, "ref")}
	own.Network = sandbox.Network{Mode: sandbox.NetworkPorts, Allow: []sandbox.Endpoint{{Host: "example.com", Port: 443}, {Port: 8080}, {Port: 22}}}
	own.Limits = sandbox.Limits{MemoryBytes: sandbox.Unlimited, OpenFiles: 100, Processes: 64}
	if got := c.Upstream("own").Sandbox; !reflect.DeepEqual(got, own) {
		t.Errorf("own:\n got %+v\nwant %+v", got, own)
	}
	tool := base
	tool.Level, tool.Required = sandbox.Off, false
	if got := c.Tools[0].Sandbox; !reflect.DeepEqual(got, tool) {
		t.Errorf("tool:\n got %+v\nwant %+v", got, tool)
	}
	for _, u := range c.MCPServers {
		if err := withHome(u.Sandbox).Validate(); err != nil {
			t.Errorf("%s: the sandbox package refuses the policy: %v", u.Name, err)
		}
	}
	if w := warningLines(c); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
}

func withHome(p sandbox.Policy) sandbox.Policy {
	p.Home = "/home"
	return p
}

// TestSandboxEmptyPaths: paths = [] is kept as an empty list (no guess),
// not as unset.
func TestSandboxEmptyPaths(t *testing.T) {
	c := loadServers(t, "[sandbox]\n[mcpServers.a]\ncommand = \"/bin/cat\"\nsandbox = { paths = [] }\n")
	if p := c.Upstream("a").Sandbox.Paths; p == nil || len(p) != 0 {
		t.Errorf("paths = %#v, want an empty non-nil list", p)
	}
}

// TestSandboxLimitBoundaries holds each limit at its exact bound.
func TestSandboxLimitBoundaries(t *testing.T) {
	for _, tc := range []struct {
		limits string
		want   sandbox.Limits
		bad    string
	}{
		{limits: `memory = 1048576`, want: sandbox.Limits{MemoryBytes: 1 << 20}},
		{limits: `memory = "1MiB"`, want: sandbox.Limits{MemoryBytes: 1 << 20}},
		{limits: `memory = "1.5GiB"`, want: sandbox.Limits{MemoryBytes: 3 << 29}},
		{limits: `memory = "2GB"`, want: sandbox.Limits{MemoryBytes: 2e9}},
		{limits: `memory = 1048575`, bad: `sandbox.limits.memory: must be a size in bytes, such as "2GiB", "512MiB" or 1073741824, of at least 1MiB, or "unlimited", got 1048575`},
		{limits: `memory = "1023KiB"`, bad: `sandbox.limits.memory: must be a size in bytes, such as "2GiB", "512MiB" or 1073741824, of at least 1MiB, or "unlimited", got "1023KiB"`},
		{limits: `memory = "2 lots"`, bad: `sandbox.limits.memory: must be a size in bytes, such as "2GiB", "512MiB" or 1073741824, of at least 1MiB, or "unlimited", got "2 lots"`},
		{limits: `memory = "9000000TiB"`, bad: `sandbox.limits.memory: must be a size in bytes, such as "2GiB", "512MiB" or 1073741824, of at least 1MiB, or "unlimited", got "9000000TiB"`},
		{limits: `open_files = 16`, want: sandbox.Limits{OpenFiles: 16}},
		{limits: `open_files = 15`, bad: `sandbox.limits.open_files: must be an integer of at least 16, or "unlimited", got 15`},
		{limits: `open_files = "4096"`, bad: `sandbox.limits.open_files: must be an integer of at least 16, or "unlimited", got "4096"`},
		{limits: `processes = 1`, want: sandbox.Limits{Processes: 1}},
		{limits: `processes = 0`, bad: `sandbox.limits.processes: must be a positive integer or "unlimited", got 0`},
		{limits: `processes = "unlimited"`, want: sandbox.Limits{Processes: sandbox.Unlimited}},
		{limits: `open_file = 16`, bad: `unknown key "sandbox.limits.open_file"; did you mean "sandbox.limits.open_files"?`},
	} {
		content := "[sandbox]\nlimits = { " + tc.limits + " }\n"
		if tc.bad != "" {
			if got := serverProblems(t, content); !slices.Equal(got, []string{tc.bad}) {
				t.Errorf("%s: problems\n %q\nwant\n %q", tc.limits, got, tc.bad)
			}
			continue
		}
		if got := loadServers(t, content).Sandbox.Limits; got != tc.want {
			t.Errorf("%s: limits %+v, want %+v", tc.limits, got, tc.want)
		}
	}
}

// TestSandboxProblems: every wrong value is named, with what is allowed.
func TestSandboxProblems(t *testing.T) {
	got := serverProblems(t, `
[sandbox]
level = "loose"
required = "yes"
network = "some"
paths = "/tmp"
limit = {}

[mcpServers.a]
command = "/bin/cat"
sandbox = 3

[mcpServers.b]
command = "/bin/cat"
sandbox = { network = [], level = "tight" }

[mcpServers.c]
command = "/bin/cat"
sandbox = { network = [0, "h:70000", "a:b:c", true], paths = ["${NOPE"] }

[mcpServers.r]
url = "https://example.com/mcp"
sandbox = "strict"

[tools.t]
command = ["/bin/echo"]
sandbox = "tight"
`)
	want := []string{
		`mcpServers.a.sandbox: must be a level ("standard", "strict" or "off") or a table of level, required, network, paths, read_only and limits, got 3`,
		`mcpServers.b.sandbox.level: must be "standard", "strict" or "off", got "tight"`,
		`mcpServers.b.sandbox.network: must be "none", "loopback", "all" or a list of "host:port" or ports, got [] (write "none" for no network)`,
		`mcpServers.c.sandbox.network[0]: must be "host:port", ":port" or a port from 1 to 65535, got 0`,
		`mcpServers.c.sandbox.network[1]: must be "host:port", ":port" or a port from 1 to 65535, got "h:70000"`,
		`mcpServers.c.sandbox.network[2]: must be "host:port", ":port" or a port from 1 to 65535, got "a:b:c"`,
		`mcpServers.c.sandbox.network[3]: must be "host:port", ":port" or a port from 1 to 65535, got true`,
		`mcpServers.r.sandbox: is a field of a server snodod starts: a remote server runs elsewhere`,
		`sandbox.level: must be "standard", "strict" or "off", got "loose"`,
		`unknown key "sandbox.limit"; did you mean "sandbox.limits"?`,
		`sandbox.network: must be "none", "loopback", "all" or a list of "host:port" or ports, got "some"`,
		`sandbox.paths: must be a list of paths, got "/tmp"`,
		`sandbox.required: must be true or false, got "yes"`,
		`tools.t.sandbox: must be a level ("standard", "strict" or "off") or a table of level, required, network, paths, read_only and limits, got "tight"`,
	}
	var paths []string
	got = slices.DeleteFunc(got, func(l string) bool {
		if strings.HasPrefix(l, "mcpServers.c.sandbox.paths: ") {
			paths = append(paths, l)
			return true
		}
		return false
	})
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(paths) != 1 || !strings.Contains(paths[0], "unterminated ${") {
		t.Errorf("the path's problem: %q", paths)
	}
}

// TestSandboxPrint: config print shows the [sandbox] in force, and its
// output loads back into the same one.
func TestSandboxPrint(t *testing.T) {
	c := loadServers(t, `
[sandbox]
level = "strict"
network = ["example.com:443", 8080]
paths = ["/srv"]
limits = { memory = "512MiB", processes = "unlimited" }
`)
	var b bytes.Buffer
	if err := c.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sandbox.level = "strict"`, `sandbox.network = ["example.com:443", "8080"]`, `sandbox.paths = ["/srv"]`,
		`sandbox.limits.memory = "512MiB"`, `sandbox.limits.open_files = 4096`, `sandbox.limits.processes = "unlimited"`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	again := mustLoad(t, Options{File: writeFile(t, "printed.toml", b.String()), Env: testEnv(t)})
	want := c.Sandbox
	want.Limits.OpenFiles = sandbox.DefaultOpenFiles // printed as the default's value
	if !reflect.DeepEqual(again.Sandbox, want) {
		t.Errorf("reloaded:\n got %+v\nwant %+v", again.Sandbox, want)
	}
	// Only what was written is said to come from the file, and a level
	// or network not written is not printed: written, it would mean more
	// (a level confines exec tools too; a network holds for strict
	// entries), so the printed file loads back the same.
	b.Reset()
	c = loadServers(t, "[sandbox]\nlimits = { memory = \"2GiB\" }\n[mcpServers.a]\ncommand = \"/bin/cat\"\nsandbox = \"strict\"\n[tools.t]\ncommand = [\"/bin/true\"]\n")
	if err := c.Print(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "sandbox.level") || strings.Contains(b.String(), "sandbox.network") {
		t.Errorf("a level or network not written is printed:\n%s", b.String())
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "sandbox.limits.open_files") && !strings.HasSuffix(l, "# default") ||
			strings.HasPrefix(l, "sandbox.limits.memory") && strings.HasSuffix(l, "# default") {
			t.Errorf("the wrong source: %q", l)
		}
	}
	again = mustLoad(t, Options{File: writeFile(t, "printed2.toml", b.String()), Env: testEnv(t)})
	if a := again.Upstream("a").Sandbox; a.Network.Mode != "" || a.Level != sandbox.Strict {
		t.Errorf("the strict entry after the round trip: %+v", a)
	}
	if tl := again.Tools[0].Sandbox.Level; tl != sandbox.Off {
		t.Errorf("the tool after the round trip: level %q, want off", tl)
	}
	// A file without [sandbox] prints none: its lack says off already.
	b.Reset()
	if err := loadServers(t, "").Print(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "sandbox.") {
		t.Errorf("a file without [sandbox] printed sandbox lines:\n%s", b.String())
	}
}

// TestDocsSandboxExample loads docs/config.md's [sandbox] example.
func TestDocsSandboxExample(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	examples := fenced(string(b), "toml sandbox")
	if len(examples) != 1 {
		t.Fatalf("found %d sandbox examples, want 1", len(examples))
	}
	c := loadServers(t, examples[0], "HOME=/home/me")
	if fs := c.Upstream("fs").Sandbox; fs.Level != sandbox.Strict || !slices.Equal(fs.Paths, []string{"/home/me/notes"}) || fs.Limits.MemoryBytes != 2<<30 {
		t.Errorf("fs: %+v", fs)
	}
	if f := c.Upstream("fetch").Sandbox; f.Level != sandbox.Standard || f.Network.Mode != sandbox.NetworkPorts || len(f.Network.Allow) != 2 {
		t.Errorf("fetch: %+v", f)
	}
}

// TestSandboxFor: the daemon's completion of a policy: the entry's private
// home under the state directory, and the hidden paths (the state
// directory, the sockets' directories, the secrets directory).
func TestSandboxFor(t *testing.T) {
	c := loadServers(t, "[sandbox]\n[daemon]\nsocket = \"/run/me/snodod/s.sock\"\ncontrol_socket = \"/run/me/ctl/c.sock\"\n", "XDG_CONFIG_HOME=/home/me/.config")
	p := c.SandboxFor(c.Sandbox, "/state", "mcpServers", "fs")
	if p.Home != "/state/sandbox/mcpServers.fs" {
		t.Errorf("home %q", p.Home)
	}
	want := []string{"/state", "/home/me/.config/snodod/secrets", "/run/me/snodod", "/run/me/ctl"}
	if !slices.Equal(p.Hide, want) {
		t.Errorf("hidden %q, want %q", p.Hide, want)
	}
	if off := c.SandboxFor(sandbox.Policy{}, "/state", "tools", "t"); off.Level != sandbox.Off || off.Home != "" {
		t.Errorf("a zero policy: %+v, want off", off)
	}
}
