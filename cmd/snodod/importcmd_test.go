package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snodod/snodod/config"
)

// What snodod import prints loads back as the same entry: a name that is
// no bare TOML key is quoted, and a control character in an argument is
// escaped as TOML allows (strconv.Quote's \a is no TOML escape).
func TestImportPrintsLoadableTOML(t *testing.T) {
	entries := map[string]any{
		"files.v2": map[string]any{"command": "/bin/true", "args": []any{"bell\a", `quote" and \`, "é"}},
	}
	var out bytes.Buffer
	writeImport(&out, "client.json", entries)
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v\n%s", err, out.Bytes())
	}
	u := cfg.Upstream("files.v2")
	if u == nil {
		t.Fatalf("no entry files.v2 in\n%s", out.Bytes())
	}
	if want := []string{"bell\a", `quote" and \`, "é"}; u.Command != "/bin/true" || !slices.Equal(u.Args, want) {
		t.Errorf("command %q args %q, want /bin/true %q", u.Command, u.Args, want)
	}
}
