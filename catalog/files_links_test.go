package catalog_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
)

// A hard link in a served folder to a file outside it
// (docs/security.md, "Files served")
// is invisible to RESOLVE_BENEATH. In a folder another user may write to
// (mode 0777 or 0770, or another owner), a file with more than one link
// is refused; in a folder only snodod's user writes, and for a file with
// one link, it is served.
func TestHardLinkOut(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secret := write(t, base, "secret.txt", "the secret")
	write(t, base, "shared/own.txt", "mine")
	write(t, base, "shared/sub/x.txt", "x")
	write(t, base, "group/x.txt", "x")
	write(t, base, "private/x.txt", "x")
	for _, d := range []struct {
		rel  string
		mode os.FileMode
	}{{"shared", 0o777}, {"group", 0o770}, {"private", 0o700}, {"shared/sub", 0o700}} {
		if err := os.Chmod(filepath.Join(base, d.rel), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"shared/leak.txt", "group/leak.txt", "private/leak.txt", "shared/sub/leak.txt"} {
		if err := os.Link(secret, filepath.Join(base, l)); err != nil {
			t.Skipf("hard links: %v", err)
		}
	}
	cfg := loadConfig(t, base, "[resources.shared]\npath = \"shared\"\n[resources.group]\npath = \"group\"\n[resources.private]\npath = \"private\"\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, "2025-11-25", `{}`)
	uri := func(rel string) string { return "file://" + filepath.Join(base, rel) }
	for _, tc := range []struct {
		rel, text string
		refusal   string
	}{
		{rel: "shared/leak.txt", refusal: "Resource refused: the file has 5 hard links and its folder " + filepath.Join(base, "shared") + " is writable by other users (uid " + strconv.Itoa(os.Geteuid()) + ", mode 0777)"},
		{rel: "group/leak.txt", refusal: "Resource refused: the file has 5 hard links and its folder " + filepath.Join(base, "group") + " is writable by other users"},
		{rel: "shared/own.txt", text: "mine"},
		{rel: "shared/sub/leak.txt", text: "the secret"},
		{rel: "private/leak.txt", text: "the secret"},
	} {
		raw, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": uri(tc.rel)})
		if tc.refusal != "" {
			if perr == nil || perr.Code != protocol.CodeInvalidParams || !strings.HasPrefix(perr.Message, tc.refusal) {
				t.Errorf("%s: %s %+v, want a refusal starting %q", tc.rel, raw, perr, tc.refusal)
			}
			continue
		}
		if perr != nil || !strings.Contains(string(raw), `"text":"`+tc.text+`"`) {
			t.Errorf("%s: %s %+v, want %q", tc.rel, raw, perr, tc.text)
		}
	}
}
