package catalog_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
)

// png1x1 is a 1×1 PNG: a file that is not text.
var png1x1, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

// tree is a folder to serve with one of each kind of entry the rules talk
// about, and a secret beside it that must never be served.
type tree struct {
	base, notes string
}

func newTree(t testing.TB) tree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := tree{base: base, notes: filepath.Join(base, "notes")}
	write(t, base, "secret.txt", "the secret")
	write(t, tr.notes, "a.md", "# A")
	write(t, tr.notes, "sub/b.txt", "b")
	write(t, tr.notes, "sub/deep/c.json", `{"c":1}`)
	write(t, tr.notes, "space name.md", "spaced")
	write(t, tr.notes, "noext", "plain words")
	write(t, tr.notes, "bin.dat", "a\x00b")
	write(t, tr.notes, "latin1.txt", "caf\xe9")
	write(t, tr.notes, "empty.txt", "")
	if err := os.WriteFile(filepath.Join(tr.notes, "img.png"), png1x1, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-in":     "a.md",
		"link-abs-in": filepath.Join(tr.notes, "sub", "b.txt"),
		"link-out":    "../secret.txt",
		"link-proc":   "/proc/self/environ",
		"link-fd":     "/proc/self/fd/0",
		"link-null":   "/dev/null",
		"loop1":       "loop2",
		"loop2":       "loop1",
		"link-dir":    "..",
	} {
		if err := os.Symlink(target, filepath.Join(tr.notes, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(tr.notes, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A socket file: bound, then left behind by its listener.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(tr.notes, "sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	return tr
}

func (tr tree) uri(rel string) string { return "file://" + tr.notes + "/" + rel }

type listedResource struct {
	URI, Name, MIMEType string
	Size                *int64
}

func TestFileResourcesList(t *testing.T) {
	tr := newTree(t)
	cfg := loadConfig(t, tr.base, "[resources.notes]\npath = \"notes\"\ndescription = \"My notes\"\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	for _, version := range []string{"2025-06-18", v2026} {
		c := newClient(t, srv, version, `{}`)
		list := result[struct{ Resources []listedResource }](t, c, t.Context(), "resources/list", nil)
		var got []string
		for _, r := range list.Resources {
			if !strings.HasPrefix(r.URI, "file://"+tr.notes+"/") || r.Size == nil {
				t.Errorf("%s: resource %+v", version, r)
			}
			got = append(got, r.Name+" "+r.MIMEType)
		}
		// Symlinks are listed when a read would serve them; FIFOs, sockets,
		// devices, loops and links out of the folder are not.
		want := []string{"a.md text/markdown", "bin.dat ", "empty.txt text/plain", "img.png image/png", "latin1.txt text/plain",
			"link-abs-in ", "link-in ", "noext ", "space name.md text/markdown", "sub/b.txt text/plain", "sub/deep/c.json application/json"}
		if !slices.Equal(got, want) {
			t.Errorf("%s: resources =\n%q\nwant\n%q", version, got, want)
		}
		templates := result[struct {
			ResourceTemplates []struct{ URITemplate, Name, Description string }
		}](t, c, t.Context(), "resources/templates/list", nil)
		if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "file://"+tr.notes+"/{+path}" ||
			templates.ResourceTemplates[0].Name != "notes" || templates.ResourceTemplates[0].Description != "My notes" {
			t.Errorf("%s: templates = %+v", version, templates.ResourceTemplates)
		}
	}
	d := result[struct {
		Capabilities struct {
			Resources struct{ Subscribe, ListChanged bool }
		}
	}](t, newClient(t, srv, v2026, `{}`), t.Context(), "server/discover", nil)
	if r := d.Capabilities.Resources; !r.Subscribe || !r.ListChanged {
		t.Errorf("resources capabilities %+v: want subscribe and listChanged", r)
	}
}

func mustDecode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

type readContents struct {
	Contents []struct{ URI, MIMEType, Text, Blob string }
}

func TestFileResourcesRead(t *testing.T) {
	tr := newTree(t)
	cfg := loadConfig(t, tr.base, "[resources.notes]\npath = \"notes\"\n[resources.open]\npath = \"notes/sub\"\nfollow_symlinks = true\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	if err := os.Symlink("/dev/null", filepath.Join(tr.notes, "sub", "null")); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"link-out", "link-proc", "link-fd"} {
		target, _ := os.Readlink(filepath.Join(tr.notes, link))
		if !filepath.IsAbs(target) {
			target = filepath.Join(tr.notes, target)
		}
		if err := os.Symlink(target, filepath.Join(tr.notes, "sub", link)); err != nil {
			t.Fatal(err)
		}
	}
	sub := func(rel string) string { return "file://" + tr.notes + "/sub/" + rel }
	refused := func(rule string) string { return "Resource refused: " + rule }
	outside := refused(`".." is not allowed in a path: nothing outside ` + tr.notes + " is served")
	for _, tc := range []struct {
		name, uri      string
		text, mimeType string // the text, or the blob in base64 when blob
		blob           bool
		code           int64 // an error instead
		message        string
	}{
		{name: "markdown", uri: tr.uri("a.md"), text: "# A", mimeType: "text/markdown"},
		{name: "nested json", uri: tr.uri("sub/deep/c.json"), text: `{"c":1}`, mimeType: "application/json"},
		{name: "percent-encoded name", uri: tr.uri("space%20name.md"), text: "spaced", mimeType: "text/markdown"},
		{name: "no extension, text", uri: tr.uri("noext"), text: "plain words", mimeType: "text/plain"},
		{name: "empty", uri: tr.uri("empty.txt"), text: "", mimeType: "text/plain"},
		{name: "png", uri: tr.uri("img.png"), text: base64.StdEncoding.EncodeToString(png1x1), blob: true, mimeType: "image/png"},
		{name: "NUL bytes", uri: tr.uri("bin.dat"), text: base64.StdEncoding.EncodeToString([]byte("a\x00b")), blob: true, mimeType: "application/octet-stream"},
		{name: "text name, not UTF-8", uri: tr.uri("latin1.txt"), text: base64.StdEncoding.EncodeToString([]byte("caf\xe9")), blob: true, mimeType: "application/octet-stream"},
		{name: "symlink inside", uri: tr.uri("link-in"), text: "# A", mimeType: "text/plain"},
		{name: "absolute symlink inside", uri: tr.uri("link-abs-in"), text: "b", mimeType: "text/plain"},
		{name: "dot segments", uri: tr.uri("./sub/./b.txt"), text: "b", mimeType: "text/plain"},
		{name: "..", uri: tr.uri("../secret.txt"), code: protocol.CodeInvalidParams, message: outside},
		{name: ".. deeper", uri: tr.uri("deep/../../secret.txt"), code: protocol.CodeInvalidParams, message: outside},
		{name: "%2e%2e", uri: tr.uri("%2e%2e/secret.txt"), code: protocol.CodeInvalidParams, message: outside},
		{name: "%2E%2E%2F", uri: tr.uri("sub%2F%2E%2E%2F%2E%2E%2Fsecret.txt"), code: protocol.CodeInvalidParams, message: outside},
		{name: "absolute", uri: tr.uri("/etc/passwd"), code: protocol.CodeInvalidParams, message: refused("an absolute path is not served; paths are relative to " + tr.notes)},
		{name: "absolute encoded", uri: tr.uri("%2Fproc%2Fself%2Fenviron"), code: protocol.CodeInvalidParams, message: refused("an absolute path is not served; paths are relative to " + tr.notes)},
		{name: "NUL", uri: tr.uri("a.md%00.txt"), code: protocol.CodeInvalidParams, message: refused("the path holds a NUL byte")},
		{name: "bad encoding", uri: tr.uri("a%zz"), code: protocol.CodeInvalidParams, message: refused("the path is not validly percent-encoded")},
		{name: "symlink out", uri: tr.uri("link-out"), code: protocol.CodeInvalidParams, message: refused("a symlink leads outside " + tr.notes + "; set follow_symlinks = true to serve what it points to")},
		{name: "symlink to the parent", uri: tr.uri("link-dir/secret.txt"), code: protocol.CodeInvalidParams, message: refused("a symlink leads outside " + tr.notes + "; set follow_symlinks = true to serve what it points to")},
		{name: "/proc/self", uri: tr.uri("link-proc"), code: protocol.CodeInvalidParams, message: refused("a symlink leads outside " + tr.notes + "; set follow_symlinks = true to serve what it points to")},
		{name: "symlink loop", uri: tr.uri("loop1"), code: protocol.CodeInvalidParams, message: refused("too many levels of symlinks (a symlink loop), or a /proc link")},
		{name: "FIFO", uri: tr.uri("fifo"), code: protocol.CodeInvalidParams, message: refused("only regular files are served, and this is a FIFO")},
		{name: "socket", uri: tr.uri("sock"), code: protocol.CodeInvalidParams, message: refused("only regular files are served, and this is a socket")},
		{name: "directory", uri: tr.uri("sub"), code: protocol.CodeInvalidParams, message: refused("only regular files are served, and this is a directory")},
		{name: "missing", uri: tr.uri("missing.md"), code: protocol.CodeResourceNotFound, message: "Resource not found"},
		{name: "under a file", uri: tr.uri("a.md/x"), code: protocol.CodeResourceNotFound, message: "Resource not found"},
		{name: "outside every folder", uri: "file://" + tr.base + "/secret.txt", code: protocol.CodeResourceNotFound, message: "Resource not found"},
		{name: "followed out", uri: sub("link-out"), text: "the secret", mimeType: "text/plain"},
		{name: "followed to /proc", uri: sub("link-proc"), code: protocol.CodeInvalidParams, message: refused("files of /proc and /sys are not served")},
		{name: "followed to a /proc magic link", uri: sub("link-fd"), code: protocol.CodeInvalidParams, message: refused("too many levels of symlinks (a symlink loop), or a /proc link")},
		{name: "followed to a device", uri: sub("null"), code: protocol.CodeInvalidParams, message: refused("only regular files are served, and this is a device")},
		{name: "followed, still no ..", uri: sub("../a.md"), code: protocol.CodeInvalidParams, message: refused(`".." is not allowed in a path: nothing outside ` + tr.notes + "/sub is served")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv, "2025-11-25", `{}`)
			raw, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": tc.uri})
			if tc.code != 0 {
				if perr == nil || perr.Code != tc.code || perr.Message != tc.message {
					t.Fatalf("read %s = %s %+v, want %d %q", tc.uri, raw, perr, tc.code, tc.message)
				}
				return
			}
			if perr != nil {
				t.Fatalf("read %s: %+v", tc.uri, perr)
			}
			var res readContents
			mustDecode(t, raw, &res)
			if len(res.Contents) != 1 {
				t.Fatalf("contents = %s", raw)
			}
			got := res.Contents[0]
			content := got.Text
			if tc.blob {
				content = got.Blob
			}
			if got.URI != tc.uri || content != tc.text || got.MIMEType != tc.mimeType || tc.blob != strings.Contains(string(raw), `"blob"`) {
				t.Errorf("read %s = %s, want %q (blob %v) as %s", tc.uri, raw, tc.text, tc.blob, tc.mimeType)
			}
		})
	}
}

func TestFileResourcesMaxFileBytes(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	write(t, dir, "r/fits.txt", "12345")
	write(t, dir, "r/over.txt", "123456")
	cfg := loadConfig(t, dir, "[resources.r]\npath = \"r\"\nmax_file_bytes = 5\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, v2026, `{}`)
	res := result[readContents](t, c, t.Context(), "resources/read", map[string]any{"uri": "file://" + dir + "/r/fits.txt"})
	if len(res.Contents) != 1 || res.Contents[0].Text != "12345" {
		t.Errorf("fits = %+v", res)
	}
	_, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": "file://" + dir + "/r/over.txt"})
	if !errIs(perr, protocol.CodeInvalidParams, "Resource too large: 6 bytes or more, and resources.r.max_file_bytes is 5") {
		t.Errorf("over = %+v", perr)
	}
}

func TestFileResourcesIncludeExclude(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	for _, rel := range []string{"a.md", "x/b.md", "x/c.txt", "private/d.md", "x/draft-e.md", "f.txt"} {
		write(t, dir, "r/"+rel, rel)
	}
	cfg := loadConfig(t, dir, "[resources.r]\npath = \"r\"\ninclude = [\"**/*.md\", \"*.txt\"]\nexclude = [\"private\", \"**/draft-*\"]\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, "2025-06-18", `{}`)
	list := result[struct{ Resources []listedResource }](t, c, t.Context(), "resources/list", nil)
	var names []string
	for _, r := range list.Resources {
		names = append(names, r.Name)
	}
	if want := []string{"a.md", "f.txt", "x/b.md"}; !slices.Equal(names, want) {
		t.Errorf("listed %q, want %q", names, want)
	}
	for _, rel := range []string{"x/c.txt", "private/d.md", "x/draft-e.md"} {
		_, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": "file://" + dir + "/r/" + rel})
		if !errIs(perr, protocol.CodeInvalidParams, "Resource refused: the file is not selected by resources.r.include and exclude") {
			t.Errorf("read %s: %+v", rel, perr)
		}
	}
}

func TestFileResourcesPagesAndLimit(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	for i := range 250 {
		write(t, dir, fmt.Sprintf("r/%03d.txt", i), "x")
	}
	cfg := loadConfig(t, dir, "[resources.r]\npath = \"r\"\n[resources.few]\npath = \"r\"\nmax_listed_files = 3\n")
	h, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, "2025-11-25", `{}`)
	var all []string
	params := map[string]any{}
	for page := 0; ; page++ {
		res := result[struct {
			Resources  []listedResource
			NextCursor string
		}](t, c, t.Context(), "resources/list", params)
		for _, r := range res.Resources {
			all = append(all, r.Name)
		}
		if res.NextCursor == "" {
			if page != 2 {
				t.Errorf("%d pages, want 3 of at most 100", page+1)
			}
			break
		}
		params = map[string]any{"cursor": res.NextCursor}
	}
	// Both entries list the same files (the config warns of the overlap),
	// with the same URIs: 250 distinct resources.
	if len(all) != 250 || all[0] != "000.txt" || all[249] != "249.txt" {
		t.Errorf("%d resources, first %q", len(all), all[:1])
	}
	want := "resources.few: more than 3 files; only 3 are listed (max_listed_files), the others can still be read through file://" + dir + "/r/{+path}"
	if w := h.Warnings(); !slices.Contains(w, want) {
		t.Errorf("warnings = %q, want %q", w, want)
	}
}

func TestFileResourceOneFile(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	write(t, dir, "todo.md", "- [ ] test")
	write(t, dir, "other.md", "not served")
	cfg := loadConfig(t, dir, "[resources.todo]\npath = \"todo.md\"\ntitle = \"To do\"\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, v2026, `{}`)
	list := result[struct {
		Resources []struct{ URI, Name, Title, MIMEType string }
	}](t, c, t.Context(), "resources/list", nil)
	if len(list.Resources) != 1 || list.Resources[0].URI != "file://"+dir+"/todo.md" || list.Resources[0].Name != "todo" || list.Resources[0].Title != "To do" {
		t.Errorf("resources = %+v", list.Resources)
	}
	templates := result[struct{ ResourceTemplates []any }](t, c, t.Context(), "resources/templates/list", nil)
	if len(templates.ResourceTemplates) != 0 {
		t.Errorf("a single file has templates: %+v", templates)
	}
	res := result[readContents](t, c, t.Context(), "resources/read", map[string]any{"uri": "file://" + dir + "/todo.md"})
	if len(res.Contents) != 1 || res.Contents[0].Text != "- [ ] test" {
		t.Errorf("read = %+v", res)
	}
	if _, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": "file://" + dir + "/other.md"}); perr == nil {
		t.Error("the file beside it was served")
	}
}

// TestFileUnreadable needs a process without CAP_DAC_OVERRIDE: as root
// (the CI container) it runs itself again as nobody, from a copy of the
// test binary that nobody may execute.
func TestFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		runAsNobody(t, "TestFileUnreadable")
		return
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	p := write(t, dir, "r/locked.txt", "locked")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, "[resources.r]\npath = \"r\"\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, "2025-11-25", `{}`)
	_, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": "file://" + p})
	if !errIs(perr, protocol.CodeInvalidParams, "Resource not readable: permission denied (snodod reads files as its own user)") {
		t.Errorf("read = %+v", perr)
	}
}

// runAsNobody runs the test named test in a copy of this binary as uid
// and gid 65534, and fails when it fails (or skips, as it must not).
func runAsNobody(t *testing.T, test string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	copyPath := filepath.Join(dir, "catalog.test")
	if err := copyFile(self, copyPath); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, copyPath} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(copyPath, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir(), "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
