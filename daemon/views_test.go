package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
)

// startNode runs a daemon serving HTTP on loopback, signing with the key
// in keyFile, whose one mcpServers entry, "fake", is the fake upstream
// listing tools tools, started with the daemon. It returns the daemon and
// its HTTP endpoint's URL.
func startNode(t *testing.T, keyFile string, tools int) (*running, string) {
	t.Helper()
	dir := shortDir(t)
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`
[daemon]
socket = %q
shutdown_grace = "2s"

[server]
state_key_file = %q

[http]
listen = "127.0.0.1:0"

[mcpServers.fake]
command = %q
args = ["-tools", "%d"]
start = "eager"
`, filepath.Join(dir, "s.sock"), keyFile, fakebuild.Build(t), tools)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, cfg, Options{StateDir: filepath.Join(dir, "state")})
	eventually.True(t, "the fake to be ready", func() bool {
		ups := r.d.Status().Upstreams
		return len(ups) == 1 && ups[0].State == control.StateReady
	})
	return r, "http://" + r.d.Status().HTTP.Listen + "/mcp"
}

// modernList is a 2026 tools/list, from cursor when it is not "".
func modernList(cursor string) string {
	c := ""
	if cursor != "" {
		c = fmt.Sprintf(`"cursor":%q,`, cursor)
	}
	return `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + c +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
}

// listPage posts a 2026 tools/list to url and returns its result.
func listPage(t *testing.T, url, cursor string) (tools int, next string) {
	t.Helper()
	resp := postMCP(t, url, "tools/list", modernList(cursor))
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Result *struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Result == nil {
		t.Fatalf("tools/list at %s (cursor %q): %d %s", url, cursor, resp.StatusCode, b)
	}
	return len(v.Result.Tools), v.Result.NextCursor
}

// Two nodes sharing server.state_key_file (docs/scale-out.md) accept
// each other's cursors in every view: a pass-through view's too, whose
// server is built from the same configuration as the aggregated one.
func TestCursorAcrossNodesInEveryView(t *testing.T) {
	key := filepath.Join(shortDir(t), "state.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 48)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tools = 150 // more than a page
	_, url1 := startNode(t, key, tools)
	_, url2 := startNode(t, key, tools)
	for _, view := range []string{"", "/fake"} {
		n1, cursor := listPage(t, url1+view, "")
		if cursor == "" {
			t.Fatalf("view %q: the first page (%d tools) has no nextCursor", view, n1)
		}
		n2, next := listPage(t, url2+view, cursor)
		if n2 == 0 || next != "" {
			t.Errorf("view %q: the other node's second page has %d tools, nextCursor %q", view, n2, next)
		}
	}
}
