package catalog_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

// loadConfig writes text as dir/config.toml and loads it with a small
// environment of the test's own (PATH, HOME) plus extra, failing the test
// on any problem.
func loadConfig(t testing.TB, dir, text string, extra ...string) *config.Config {
	t.Helper()
	cfg, err := tryConfig(t, dir, text, extra...)
	if err != nil {
		t.Fatalf("load:\n%v", err)
	}
	return cfg
}

func tryConfig(t testing.TB, dir, text string, extra ...string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_RUNTIME_DIR=/run/test"}, extra...)
	return config.Load(config.Options{File: path, Env: env})
}

// newHost returns a Host, closed when the test ends, with cfg applied, and
// its server.
func newHost(t testing.TB, cfg *config.Config, o catalog.HostOptions) (*catalog.Host, *server.Server) {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	h := catalog.NewHost(o)
	t.Cleanup(h.Close)
	srv, err := h.Apply(cfg)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return h, srv
}

// write writes content to dir/rel, making its folders.
func write(t testing.TB, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfig(t, dir, `
[tools.status]
command = ["/bin/true"]
[tools.bad]
command = ["/bin/true"]
input_schema = { type = "object", properties = { x = { type = "strin" } } }
output = "json"
output_schema = { type = 5 }
[tools.gh__search]
command = ["/bin/true"]
[prompts.p]
template = "x"
`)
	got := catalog.Check(cfg, catalog.Reserved{Tools: map[string]string{"gh__search": "the tool search of upstream gh"},
		Prompts: map[string]string{"p": "the prompt p of upstream gh"}})
	var lines []string
	for _, p := range got {
		lines = append(lines, p.String())
	}
	want := []string{
		`prompts.p: the name is taken by the prompt p of upstream gh; choose another name`,
		`tools.bad.input_schema: is not a JSON Schema the runtime accepts: `,
		`tools.bad.output_schema: is not a JSON Schema the runtime accepts: `,
		`tools.gh__search: the name is taken by the tool search of upstream gh; choose another name`,
		`tools.status: the name is taken by snodod's own status tool; choose another name`,
	}
	if len(lines) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d = %q, want %q…", i, lines[i], want[i])
		}
	}
}

// TestHostReload: a reload replaces only what changed and announces only
// the lists that changed, on the same server; a refused configuration
// changes nothing; names the demo catalog holds are refused.
func TestHostReload(t *testing.T) {
	dir := t.TempDir()
	tools := func(desc string) string {
		return "[tools.a]\ncommand = [\"/bin/echo\", \"a\"]\ndescription = \"" + desc + "\"\n[tools.b]\ncommand = [\"/bin/echo\", \"b\"]\n"
	}
	h, srv := newHost(t, loadConfig(t, dir, tools("one")), catalog.HostOptions{Register: catalog.Demo})
	c := newClient(t, srv, "2025-11-25", `{}`)
	pending := func() []string {
		var got []string
		for {
			ev, ok, _ := c.sess.Poll()
			if !ok {
				return got
			}
			got = append(got, ev.Method)
		}
	}
	pending()

	same, err := h.Apply(loadConfig(t, dir, tools("one")))
	if err != nil || same != srv {
		t.Fatalf("an unchanged reload: %v, same server %v", err, same == srv)
	}
	if got := pending(); len(got) != 0 {
		t.Errorf("an unchanged reload announced %q", got)
	}
	if _, err := h.Apply(loadConfig(t, dir, tools("two")+"[prompts.p]\ntemplate = \"x\"\n")); err != nil {
		t.Fatal(err)
	}
	if got := pending(); !slices.Equal(got, []string{"notifications/tools/list_changed", "notifications/prompts/list_changed"}) {
		t.Errorf("a reload that changed a tool and added a prompt announced %q", got)
	}
	if got := callTool(t, c, t.Context(), "a", nil).text(t); got != "a\n" {
		t.Errorf("a = %q", got)
	}

	_, err = h.Apply(loadConfig(t, dir, "[tools.echo]\ncommand = [\"/bin/echo\"]\n"))
	var ve *config.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 ||
		ve.Problems[0].String() != "tools.echo: the name is taken by a tool snodod serves itself (echo); choose another name" {
		t.Fatalf("a configured name the demo holds: %v", err)
	}
	if got := pending(); len(got) != 0 {
		t.Errorf("a refused reload announced %q", got)
	}
	if got := callTool(t, c, t.Context(), "b", nil).text(t); got != "b\n" {
		t.Errorf("after a refused reload, b = %q", got)
	}

	// What the server says about itself is fixed at server.New: a new
	// one, for the sessions that start after.
	other, err := h.Apply(loadConfig(t, dir, tools("two")+"[server]\ninstructions = \"new\"\n"))
	if err != nil || other == srv {
		t.Fatalf("new instructions: %v, new server %v", err, other != srv)
	}
	if got := callTool(t, newClient(t, other, v2026, `{}`), t.Context(), "echo", map[string]any{"text": "hi"}).text(t); got != "hi" {
		t.Errorf("the new server lacks the demo: %q", got)
	}
}

// config refuses a state key shorter than the server accepts, with the
// same bound: config check says what serve refuses.
func TestSecretMinimumIsTheServers(t *testing.T) {
	if config.MinSecretBytes != server.MinStateKeyBytes {
		t.Errorf("config.MinSecretBytes = %d, server.MinStateKeyBytes = %d", config.MinSecretBytes, server.MinStateKeyBytes)
	}
}
