package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snodod/snodod/config"
)

// What snodod import prints loads back as the same entry: a name that is
// no bare TOML key is quoted, and a control character in an argument is
// escaped as TOML allows (strconv.Quote's \a is no TOML escape), and a
// remote server (url, or Windsurf's serverUrl) is its url entry.
func TestImportPrintsLoadableTOML(t *testing.T) {
	dir := t.TempDir()
	client := filepath.Join(dir, "client.json")
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"files.v2": map[string]any{"command": "/bin/true", "args": []any{"bell\a", `quote" and \`, "é"}},
		"web":      map[string]any{"url": "https://example.com/mcp"},
		"windsurf": map[string]any{"serverUrl": "https://example.com/mcp"},
	}})
	if err := os.WriteFile(client, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cf, err := config.ReadClientFile(client)
	if err != nil {
		t.Fatal(err)
	}
	im := &importer{file: cf, secrets: filepath.Join(dir, "secrets")}
	entries, err := im.convert()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeImport(&out, cf, entries, im.written, "/usr/bin/snodod", "config.toml")
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
	for _, remote := range []string{"web", "windsurf"} {
		if r := cfg.Upstream(remote); r == nil || r.Remote == nil || r.Remote.URL != "https://example.com/mcp" {
			t.Errorf("%s: %+v in\n%s", remote, r, out.Bytes())
		}
	}
	if len(cfg.MCPServers) != 3 {
		t.Errorf("entries %v, want files.v2, web and windsurf", cfg.MCPServers)
	}
	if want := []string{"bell\a", `quote" and \`, "é"}; u.Command != "/bin/true" || !slices.Equal(u.Args, want) {
		t.Errorf("command %q args %q, want /bin/true %q", u.Command, u.Args, want)
	}
}
