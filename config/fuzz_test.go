package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var fuzzFormats = []string{".toml", ".yaml", ".json"}

// FuzzLoad loads any file, in each format, under any SNODOD_* environment,
// and checks the loader's contract: a Config or an error, never both and
// never neither; the error a *FileError or a *ValidationError whose
// problems are one line each; and a Config that `config print` turns into
// a file that loads back to the same values (print.go), whose --json form
// is valid JSON.
func FuzzLoad(f *testing.F) {
	for _, seed := range []struct {
		format uint8
		file   string
		env    string
	}{
		{0, "[session]\nwrite_timeout = \"10s\"\nmax_line_bytes = 8000000\n[daemon]\nallowed_uids = [1001]\n", ""},
		{0, "session.write_timeout = 5s\n", "SNODOD_EXECUTOR__MAX_QUEUE=-1"},
		{0, "[tools.t]\ncommand = [\"/bin/echo\", \"{{a}}\"]\ninput.a = { required = true }\nenv = { K = \"${HOME:-x}\" }\n", ""},
		{0, "[resources.r]\npath = \"/\"\ninclude = [\"**/*.md\"]\n[prompts.p]\ntemplate = \"{{.x}}\"\narguments.x = {}\n", ""},
		{1, "session:\n  write_timeout: 10s\nprotocol:\n  versions: [\"2026-07-28\"]\nhttp:\n  listen: 127.0.0.1:8080\n", "SNODOD_HTTP__ALLOWED_ORIGINS="},
		{1, "daemon:\n  socket: $XDG_RUNTIME_DIR/x.sock\nlog: {level: loud}\n", "SNODOD_SESSION_WRITE_TIMEOUT=1s"},
		{2, `{"session":{"max_line_bytes":"2000000"},"server":{"cache_ttl":0},"daemon":{"allowed_uids":[0,4294967295]}}`, "SNODOD_DAEMON__ALLOWED_UIDS=1,2\nSNODOD_PROTOCOL__VERSIONS=2025-06-18"},
		{2, `{"http":{"listen":"0.0.0.0:1","allowed_hosts":["a:1"],"node_id":"n-1"}}`, "SNODOD_HTTP__ALLOW_UNAUTHENTICATED=true"},
		{0, "[mcpServers.s]\ncommand = \"/bin/sh\"\nargs = [\"$$x\", \"${A:-${B}}\"]\nenv = { T = \"${file:${HOME}/t}\" }\nenv_file = \"x.env\"\nshare = \"cwd\"\ncwd = \"${client.cwd}/x\"\n", "A="},
		{2, `{"mcpServers":{"s":{"type":"stdio","command":["/bin/sh","-c"],"envFile":"e","timeout":5,"restart":{"max_attempts":1}}}}`, ""},
	} {
		f.Add(seed.format, []byte(seed.file), seed.env)
	}
	f.Fuzz(func(t *testing.T, format uint8, file []byte, vars string) {
		dir := t.TempDir()
		env := []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg"), "XDG_RUNTIME_DIR=/run/test", "HOME=" + dir}
		for _, kv := range strings.Split(vars, "\n") {
			if name, _, ok := strings.Cut(kv, "="); ok && name != "" && !strings.ContainsRune(kv, 0) {
				env = append(env, kv)
			}
		}
		path := filepath.Join(dir, "config"+fuzzFormats[int(format)%len(fuzzFormats)])
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(Options{File: path, Env: env})
		if (c == nil) == (err == nil) {
			t.Fatalf("Load returned %v and %v", c, err)
		}
		if err != nil {
			checkLoadError(t, err)
			return
		}
		var printed, js bytes.Buffer
		if err := c.Print(&printed); err != nil {
			t.Fatal(err)
		}
		if err := c.PrintJSON(&js); err != nil || !json.Valid(js.Bytes()) {
			t.Fatalf("PrintJSON: %v\n%s", err, js.Bytes())
		}
		if strings.Contains(c.Daemon.Socket+c.Daemon.ControlSocket, "$") {
			return // a variable's value holding $ is expanded again on reading: not a fixed point
		}
		again := filepath.Join(dir, "printed.toml")
		if err := os.WriteFile(again, printed.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		c2, err := Load(Options{File: again, Env: env[:3]})
		if err != nil {
			t.Fatalf("config print's output does not load back: %v\n%s", err, printed.Bytes())
		}
		if got, want := sectionsOf(c2), sectionsOf(c); !sameKeys(got, want) {
			t.Fatalf("config print's output loads back as other values:\nprinted\n%s", printed.Bytes())
		}
	})
}

// sameKeys compares the keys' values of two configurations (the entry
// sections are not printed, so they are not compared).
func sameKeys(a, b Config) bool {
	var pa, pb bytes.Buffer
	_ = (&a).PrintJSON(&pa)
	_ = (&b).PrintJSON(&pb)
	strip := func(b []byte) map[string]any {
		var m map[string]map[string]any
		_ = json.Unmarshal(b, &m)
		out := map[string]any{}
		for k, v := range m {
			out[k] = v["value"]
		}
		return out
	}
	x, _ := json.Marshal(strip(pa.Bytes()))
	y, _ := json.Marshal(strip(pb.Bytes()))
	return bytes.Equal(x, y)
}

func checkLoadError(t *testing.T, err error) {
	var fe *FileError
	var ve *ValidationError
	switch {
	case errors.As(err, &fe):
		if fe.Path == "" || fe.Err == nil {
			t.Fatalf("a FileError without its path or cause: %#v", fe)
		}
	case errors.As(err, &ve):
		if len(ve.Problems) == 0 {
			t.Fatal("a ValidationError without problems")
		}
		for _, p := range ve.Problems {
			if s := p.String(); s == "" || strings.ContainsAny(s, "\n\r") {
				t.Fatalf("a problem that is not one line: %q", s)
			}
		}
	default:
		t.Fatalf("Load returned %T: %v", err, err)
	}
}
