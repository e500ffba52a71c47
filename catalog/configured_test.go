package catalog_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

// loadConfig writes text as dir/config.toml and loads it with a small
// environment of the test's own (PATH, HOME) plus extra, failing the test
// on any problem.
func loadConfig(t *testing.T, dir, text string, extra ...string) *config.Config {
	t.Helper()
	cfg, err := tryConfig(t, dir, text, extra...)
	if err != nil {
		t.Fatalf("load:\n%v", err)
	}
	return cfg
}

func tryConfig(t *testing.T, dir, text string, extra ...string) (*config.Config, error) {
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
func newHost(t *testing.T, cfg *config.Config, o catalog.HostOptions) (*catalog.Host, *server.Server) {
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
func write(t *testing.T, dir, rel, content string) string {
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
