package daemon

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/syncbuf"
	"github.com/snodod/snodod/server"
)

// The running log.format is the one the daemon started with, however many
// reloads came between: a second reload back to it warns of nothing (it
// used to say running=json configured=text while the logs were text).
func TestReloadRestartOnlyKeys(t *testing.T) {
	dir := shortDir(t)
	var logs syncbuf.Buffer
	cfg := testConfig(t, dir, nil)
	d, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		format string
		want   string // the warning, "" for none
	}{
		{"json", `msg="this setting applies only after a restart" key=log.format running=text configured=json`},
		{"text", ""},
		{"json", `msg="this setting applies only after a restart" key=log.format running=text configured=json`},
		{"json", `msg="this setting applies only after a restart" key=log.format running=text configured=json`},
	} {
		next := testConfig(t, dir, map[string]any{"log.format": step.format})
		d.opts.Reload = func() (*config.Config, error) { return next, nil }
		if err := d.Reload(); err != nil {
			t.Fatal(err)
		}
		got := logs.Take()
		if step.want == "" && strings.Contains(got, "applies only after a restart") || !strings.Contains(got, step.want) {
			t.Errorf("reload %d to %s logged:\n%s\nwant %q", i+1, step.format, got, step.want)
		}
	}
}

// server.demo applies on reload: sessions that start afterwards get the
// demo tools (the key exists so that a unit file can turn --demo on).
func TestReloadDemo(t *testing.T) {
	dir := shortDir(t)
	var next *config.Config
	r := startDaemon(t, testConfig(t, dir, nil), Options{
		Catalog: func(*server.Server) {}, // no demo but the key's
		Reload:  func() (*config.Config, error) { return next, nil },
	})
	before := dialSession(t, r.cfg.Daemon.Socket)
	before.initialize()
	if got := before.call(2, "echo", `{"text":"x"}`); !strings.Contains(got, `"error"`) && !strings.Contains(got, `"isError":true`) {
		t.Fatalf("echo without the demo: %s", got)
	}
	next = testConfig(t, dir, map[string]any{"server.demo": true})
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	after := dialSession(t, r.cfg.Daemon.Socket)
	after.initialize()
	if got := after.call(2, "echo", `{"text":"x"}`); !strings.Contains(got, `"text":"x"`) {
		t.Errorf("echo after server.demo = true: %s", got)
	}
}

// A generation a reload replaced is held by the sessions it started, and
// let go by the last of them: then it detaches what it attached to the
// upstreams (docs/architecture.md §3.6), while the new one stays held.
func TestReloadLetsTheOldGenerationGo(t *testing.T) {
	dir := shortDir(t)
	var next *config.Config
	r := startDaemon(t, testConfig(t, dir, nil), Options{Reload: func() (*config.Config, error) { return next, nil }})
	old := r.d.gen.Load()
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	if n := old.users.Load(); n != 2 {
		t.Fatalf("the generation has %d holders with one session, want 2", n)
	}
	next = testConfig(t, dir, map[string]any{"server.instructions": "a new server"})
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	g := r.d.gen.Load()
	if g == old || g.srv == old.srv {
		t.Fatal("the reload built no new server")
	}
	if n := old.users.Load(); n != 1 {
		t.Fatalf("the replaced generation has %d holders, want its session's", n)
	}
	if got := c.call(2, "echo", `{"text":"still served"}`); !strings.Contains(got, "still served") {
		t.Fatalf("the old generation's session: %s", got)
	}
	c.c.Close()
	eventually.True(t, "the old generation to be let go", func() bool { return old.users.Load() == 0 })
	if n := g.users.Load(); n != 1 {
		t.Errorf("the current generation has %d holders, want the daemon's", n)
	}
	if old.acquire() {
		t.Error("a generation let go was held again")
	}
}

// The [admin] keys are read once, at the start (admin.go): a reload that
// changes one warns that it applies only after a restart, as it does for
// http.*, and a reload back to the running value warns of nothing.
func TestReloadWarnsOfAdminKeys(t *testing.T) {
	dir := shortDir(t)
	var logs syncbuf.Buffer
	d, err := New(testConfig(t, dir, nil), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		key  string
		val  any
		warn bool
	}{
		{"admin.max_viewers", 7, true},
		{"admin.viewer_write_timeout", "9s", true},
		{"admin.native_histograms", false, true}, // the default is true
		{"admin.listen", "127.0.0.1:1", true},
		{"admin.max_viewers", 100, false}, // the default: the running value
	} {
		next := testConfig(t, dir, map[string]any{step.key: step.val})
		d.opts.Reload = func() (*config.Config, error) { return next, nil }
		if err := d.Reload(); err != nil {
			t.Fatal(err)
		}
		got := logs.Take()
		warned := strings.Contains(got, `msg="this setting applies only after a restart" key=admin.*`)
		if warned != step.warn {
			t.Errorf("reload to %s = %v logged:\n%s\nwant a warning for admin.*: %v", step.key, step.val, got, step.warn)
		}
	}
}
