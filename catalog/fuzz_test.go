package catalog_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
)

// FuzzExecArgv runs an exec tool whose argv holds a value alone, inside
// an element and as an array, with values of any content, and checks with
// the program's own argv that each value arrived as exactly one element,
// byte for byte (docs/config.md, "Placeholders"). A value argv cannot
// carry (a NUL byte) is refused with a message saying so.
func FuzzExecArgv(f *testing.F) {
	for _, seed := range []struct{ s, items string }{
		{"plain", "a\x1fb"},
		{"a b \"c\" 'd'", ""},
		{"; rm -rf x | y && z $(id) `id` $HOME * ? ~", "-rf\x1f--help\x1f*"},
		{"a\nb\r\n\t", "\n"},
		{"-", "--"},
		{"{{s}}", "{{arr}}"},
		{"\x00", "x\x00y"},
		{"\xff\xfe", "héllo 🎉"},
	} {
		f.Add(seed.s, seed.items)
	}
	dir := f.TempDir()
	c := execHost(f, dir, helperTool(f, "argv", "argv", []string{"--", "{{s}}", "pre{{s}}post", "{{arr}}"},
		"input.s = { required = true }\ninput.arr = { type = \"array\" }"))
	f.Fuzz(func(t *testing.T, s, items string) {
		c.t = t // the client reports to the running input, never to f
		arr := strings.Split(items, "\x1f")
		// What the client's JSON carries: invalid UTF-8 arrives as U+FFFD.
		var args struct {
			S   string   `json:"s"`
			Arr []string `json:"arr"`
		}
		raw, _ := json.Marshal(map[string]any{"s": s, "arr": arr})
		_ = json.Unmarshal(raw, &args)
		out := c.dispatch(context.Background(), "tools/call", map[string]any{"name": "argv", "arguments": json.RawMessage(raw)})
		if out.Err != nil {
			t.Fatalf("tools/call: %v", out.Err)
		}
		res, err := json.Marshal(out.Result)
		if err != nil {
			t.Fatal(err)
		}
		var r toolResult
		if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
			t.Fatalf("result %s: %v", res, err)
		}
		text := r.Content[0].Text
		if strings.ContainsRune(args.S, 0) || slices.ContainsFunc(args.Arr, func(v string) bool { return strings.ContainsRune(v, 0) }) {
			if !r.IsError || !strings.Contains(text, "NUL") {
				t.Fatalf("a value holding a NUL byte: result %s, want an error naming the NUL byte", res)
			}
			return
		}
		var got []string
		if r.IsError || json.Unmarshal([]byte(text), &got) != nil {
			t.Fatalf("result %s", res)
		}
		want := append([]string{"--", args.S, "pre" + args.S + "post"}, args.Arr...)
		if !slices.Equal(got, want) {
			t.Fatalf("argv[1:] =\n%q\nwant\n%q", got, want)
		}
	})
}

// FuzzFileResolution reads any path under a served folder whose tree has
// one entry of every kind the confinement rules name (newTree: symlinks in
// and out, absolute ones, loops, /proc and /dev links, a FIFO, a socket,
// a link to the parent) through the folder's template, and checks that
// nothing outside the folder is ever served: every read that succeeds
// returns a regular file of the folder, and every refusal is -32602 or
// "not found". With follow_symlinks, a read may leave the folder only
// through a symlink, and still only for a regular file.
func FuzzFileResolution(f *testing.F) {
	for _, seed := range []string{
		"a.md", "sub/b.txt", "link-in", "link-abs-in", "link-out", "link-proc", "link-fd", "link-null", "loop1",
		"link-dir/secret.txt", "fifo", "sock", "sub/../a.md", "%2e%2e/secret.txt", "sub/%2E%2E/../secret.txt",
		"/etc/passwd", "%2Fetc%2Fpasswd", "sub//deep/./c.json", "a.md%00.txt", "space%20name.md", "link-dir/notes/a.md",
		"..%2fsecret.txt", "%252e%252e/secret.txt", "sub/deep/../../../secret.txt", "",
	} {
		f.Add(seed, false)
	}
	tr := newTree(f)
	// The folder's own files and the one outside: a read may serve only
	// the first, or with follow_symlinks a regular file beside them.
	inside := map[string]bool{}
	for _, rel := range []string{"a.md", "sub/b.txt", "sub/deep/c.json", "space name.md", "noext", "bin.dat", "latin1.txt", "empty.txt", "img.png"} {
		b, err := os.ReadFile(tr.notes + "/" + rel)
		if err != nil {
			f.Fatal(err)
		}
		inside[string(b)] = true
	}
	clients := map[bool]*client{}
	for _, follow := range []bool{false, true} {
		cfg := loadConfig(f, tr.base, "[resources.notes]\npath = \"notes\"\nfollow_symlinks = "+map[bool]string{false: "false", true: "true"}[follow]+"\n")
		_, srv := newHost(f, cfg, catalog.HostOptions{})
		clients[follow] = newClient(f, srv, "2025-11-25", `{}`)
	}
	f.Fuzz(func(t *testing.T, rel string, follow bool) {
		uri := tr.uri(rel)
		clients[follow].t = t
		out := clients[follow].dispatch(context.Background(), "resources/read", map[string]any{"uri": uri})
		if perr := out.Err; perr != nil {
			if perr.Code != protocol.CodeInvalidParams && perr.Code != protocol.CodeResourceNotFound {
				t.Fatalf("read %q: error %d %q", uri, perr.Code, perr.Message)
			}
			return
		}
		res, err := json.Marshal(out.Result)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Contents []struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
				Blob []byte `json:"blob"`
			} `json:"contents"`
		}
		if err := json.Unmarshal(res, &r); err != nil || len(r.Contents) != 1 {
			t.Fatalf("read %q: result %s: %v", uri, res, err)
		}
		content := r.Contents[0].Text + string(r.Contents[0].Blob)
		switch {
		case inside[content]:
		case follow && content == "the secret": // link-out, with follow_symlinks
			if decoded, _ := url.PathUnescape(rel); !strings.Contains(decoded, "link-out") && !strings.Contains(decoded, "link-dir") {
				t.Fatalf("read %q served the file outside the folder without a symlink leading there", uri)
			}
		default:
			t.Fatalf("read %q (follow_symlinks %v) served %.100q, which is not a file of the folder", uri, follow, content)
		}
	})
}
