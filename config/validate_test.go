package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// row is one value of one key, written into a TOML file, and the problem
// lines it must produce (none: it loads).
type row struct {
	key, value string
	want       []string
}

// tomlFor writes key = value under its section.
func tomlFor(key, value string) string {
	section, leaf, _ := strings.Cut(key, ".")
	return fmt.Sprintf("[%s]\n%s = %s\n", section, leaf, value)
}

func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.key+"="+r.value, func(t *testing.T) {
			path := writeFile(t, "config.toml", tomlFor(r.key, r.value))
			_, err := Load(Options{File: path, Env: testEnv(t)})
			if len(r.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if got := problemLines(t, err); !slices.Equal(got, r.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(r.want, "\n"))
			}
		})
	}
}

// TestLimitBoundaries checks every positive integer and positive duration
// key at its boundary: the smallest allowed value loads, zero and negative
// values are refused with the key's message.
func TestLimitBoundaries(t *testing.T) {
	var rows []row
	ints, durations := 0, 0
	for _, k := range Keys() {
		switch k.Allowed {
		case "must be a positive integer":
			ints++
			rows = append(rows,
				row{k.Name, "1", nil},
				row{k.Name, `"2000"`, nil}, // text is read as the environment's is
				row{k.Name, "0", []string{k.Name + ": must be a positive integer, got 0"}},
				row{k.Name, "-1", []string{k.Name + ": must be a positive integer, got -1"}},
				row{k.Name, `"abc"`, []string{k.Name + `: must be a positive integer, got "abc"`}},
				row{k.Name, "1.5", []string{k.Name + ": must be a positive integer, got 1.5"}},
			)
		case "must be a positive duration":
			durations++
			rows = append(rows,
				row{k.Name, `"1ns"`, nil},
				row{k.Name, `"1h30m"`, nil},
				row{k.Name, `"0s"`, []string{k.Name + `: must be a positive duration, got "0s"`}},
				row{k.Name, "0", []string{k.Name + `: must be a positive duration, got "0s"`}},
				row{k.Name, `"-1s"`, []string{k.Name + `: must be a positive duration, got "-1s"`}},
				row{k.Name, `"abc"`, []string{k.Name + `: must be a positive duration, got "abc"`}},
				row{k.Name, "5", []string{k.Name + `: must be a positive duration with a unit, such as "30s", got 5`}},
			)
		}
	}
	if ints != 24 || durations != 12 {
		t.Fatalf("found %d positive integer and %d positive duration keys, want 24 and 12", ints, durations)
	}
	runRows(t, rows)
}

func TestRules(t *testing.T) {
	long := "/" + strings.Repeat("s", maxSocketPath-1) // 107 bytes
	runRows(t, []row{
		{"session.max_line_bytes", "2000000.0", nil}, // JSON-style numbers
		{"server.cache_ttl", `"0s"`, nil},
		{"server.cache_ttl", "0", nil},
		{"server.cache_ttl", `"1500ms"`, nil},
		{"server.cache_ttl", `"-1ns"`, []string{`server.cache_ttl: must be a non-negative duration, got "-1ns"`}},
		{"upstreams.max_tools", "0", nil},
		{"upstreams.max_tools", "3", nil},
		{"upstreams.max_tools", "2", []string{"upstreams.max_tools: must be 0 or an integer of at least 3 (search_tools, call_tool and one more), got 2"}},
		{"upstreams.always", `["fs__read_*", "demo__echo"]`, nil},
		{"upstreams.always", `["fs__[x"]`, []string{`upstreams.always: entries must be tool names or globs, as the aggregated view names them, got "fs__[x"`}},
		{"server.cache_scope", `"public"`, nil},
		{"server.cache_scope", `"private"`, nil},
		{"server.cache_scope", `"Public"`, []string{`server.cache_scope: must be "public" or "private", got "Public"`}},
		{"server.name", `"x"`, nil},
		{"server.name", `""`, []string{`server.name: must be a non-empty string, got ""`}},
		{"server.version", `"1.2.3"`, nil},
		{"server.version", "1.0", []string{`server.version: must be a string, got 1`}},
		{"server.website_url", `""`, nil},
		{"server.website_url", `"https://example.com/snodod"`, nil},
		{"server.website_url", `"ftp://example.com"`, []string{`server.website_url: must be empty or an http or https URL, got "ftp://example.com"`}},
		{"server.website_url", `"example.com"`, []string{`server.website_url: must be empty or an http or https URL, got "example.com"`}},
		{"protocol.versions", `["2025-06-18"]`, nil},
		{"protocol.versions", `[2026-07-28, 2025-11-25]`, nil}, // TOML dates read as their text
		{"protocol.versions", `[]`, nil},
		{"protocol.versions", `["2025-06-18", "2025-06-18"]`, []string{`protocol.versions: may list only 2026-07-28, 2025-11-25 and 2025-06-18, each once, got ["2025-06-18", "2025-06-18"]`}},
		{"protocol.versions", `["2024-11-05"]`, []string{`protocol.versions: may list only 2026-07-28, 2025-11-25 and 2025-06-18, each once, got ["2024-11-05"]`}},
		{"protocol.versions", `[1]`, []string{`protocol.versions: may list only 2026-07-28, 2025-11-25 and 2025-06-18, each once, got [1]`}},
		{"daemon.allowed_uids", `[0, 4294967294]`, nil},
		{"daemon.allowed_uids", `[-1, 1000, 4294967295]`, []string{
			`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got -1`,
			`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got 4294967295`,
		}},
		{"daemon.allowed_uids", `["root"]`, []string{`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got "root"`}},
		// One line per bad entry, whatever makes it bad.
		{"daemon.allowed_uids", `["bob", 1001]`, []string{`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got "bob"`}},
		{"daemon.allowed_uids", `["bob", -1, 1001, 2.5]`, []string{
			`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got "bob"`,
			`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got -1`,
			`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got 2.5`,
		}},
		{"http.allowed_origins", `["https://ok.example", 7]`, []string{`http.allowed_origins: entries must be origins (scheme://host[:port]), got 7`}},
		{"daemon.allowed_uids", `1000`, []string{`daemon.allowed_uids: entries must be user ids from 0 to 4294967294, got 1000`}},
		{"daemon.socket", `"/x/s.sock"`, nil},
		{"daemon.socket", `"${XDG_RUNTIME_DIR}/x.sock"`, nil},
		{"daemon.socket", `"` + long + `"`, nil},
		{"daemon.socket", `"` + long + `s"`, []string{`daemon.socket: must be an absolute path of at most 107 bytes, got "` + long + `s"`}},
		{"daemon.socket", `"s.sock"`, []string{`daemon.socket: must be an absolute path of at most 107 bytes, got "s.sock"`}},
		{"daemon.socket", `"${NOPE}/s.sock"`, []string{`daemon.socket: uses ${NOPE}, which is not set in the daemon's environment; set it, or write ${NOPE:-default}, got "${NOPE}/s.sock"`}},
		{"daemon.socket", `"$NOPE/s.sock"`, []string{`daemon.socket: writes $NOPE, which is not expanded: write ${NOPE}, got "$NOPE/s.sock"`}},
		{"daemon.socket", `"/run/test/snodod/control.sock"`, []string{`daemon.control_socket: must differ from daemon.socket, got "/run/test/snodod/control.sock"`}},
		{"daemon.control_socket", `""`, nil},
		{"daemon.control_socket", `"/elsewhere/c.sock"`, nil},
		{"daemon.control_socket", `"c.sock"`, []string{`daemon.control_socket: must be empty or an absolute path of at most 107 bytes, got "c.sock"`}},
		{"http.listen", `""`, nil},
		{"http.listen", `":8080"`, nil},
		{"http.listen", `"127.0.0.1:0"`, nil},
		{"http.listen", `"[::1]:65535"`, nil},
		{"http.listen", `"localhost:65536"`, []string{`http.listen: must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes, got "localhost:65536"`}},
		{"http.listen", `"8080"`, []string{`http.listen: must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes, got "8080"`}},
		{"http.listen", `"::1:80"`, []string{`http.listen: must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes, got "::1:80"`}},
		{"http.listen", `"unix:/run/snodod/http.sock"`, nil},
		{"http.listen", `"unix:relative.sock"`, []string{`http.listen: must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes, got "unix:relative.sock"`}},
		{"http.listen", `"unix:/` + strings.Repeat("x", 107) + `"`, []string{`http.listen: must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes, got "unix:/` + strings.Repeat("x", 107) + `"`}},
		{"http.listen", `"unix:/` + strings.Repeat("x", 106) + `"`, nil},
		{"http.listen", `"host:http"`, []string{`http.listen: must be empty, host:port (such as "127.0.0.1:8080" or ":8080"), or unix: and an absolute path of at most 107 bytes, got "host:http"`}},
		{"http.path", `"/"`, nil},
		{"http.path", `"/v1/mcp"`, nil},
		{"http.path", `"mcp"`, []string{`http.path: must start with / and contain no ?, # or spaces, got "mcp"`}},
		{"http.path", `""`, []string{`http.path: must start with / and contain no ?, # or spaces, got ""`}},
		{"http.path", `"/mcp?x=1"`, []string{`http.path: must start with / and contain no ?, # or spaces, got "/mcp?x=1"`}},
		{"http.allowed_origins", `["https://example.com", "http://localhost:3000", "vscode-webview://abc"]`, nil},
		{"http.allowed_origins", `["https://example.com/", "example.com", "https://ok.example"]`, []string{
			`http.allowed_origins: entries must be origins (scheme://host[:port]), got "https://example.com/"`,
			`http.allowed_origins: entries must be origins (scheme://host[:port]), got "example.com"`,
		}},
		{"http.allowed_origins", `["http://x:99999"]`, []string{`http.allowed_origins: entries must be origins (scheme://host[:port]), got "http://x:99999"`}},
		{"log.level", `"debug"`, nil},
		{"log.level", `"error"`, nil},
		{"log.level", `"INFO"`, []string{`log.level: must be "debug", "info", "warn" or "error", got "INFO"`}},
		{"log.format", `"json"`, nil},
		{"log.format", `"yaml"`, []string{`log.format: must be "text" or "json", got "yaml"`}},
	})
}

func TestUnknownKeys(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"[session]\nwrite_timout = \"1s\"\n", `unknown key "session.write_timout"; did you mean "session.write_timeout"?`},
		{"[session]\nwrite-timeout = \"1s\"\n", `unknown key "session.write-timeout"; did you mean "session.write_timeout"?`},
		{"[Session]\nWrite_Timeout = \"1s\"\n", `unknown key "Session.Write_Timeout"; did you mean "session.write_timeout"?`},
		{"[session]\nmax_concurrency = 1\n", `unknown key "session.max_concurrency"; did you mean "executor.max_concurrency"?`},
		{"write_timeout = \"1s\"\n", `unknown key "write_timeout"; did you mean "session.write_timeout"?`},
		{"max_subscriptions = 1\n", `unknown key "max_subscriptions"; did you mean "session.max_subscriptions" or "http.max_subscriptions"?`},
		{"[bogus]\nthing = 1\n", `unknown key "bogus.thing"`},
		{"session = 5\n", `session: must be a table of keys, got 5`},
		{"[session.write_timeout]\nx = 1\n", `session.write_timeout: must be a positive duration, got {x = 1}`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			path := writeFile(t, "config.toml", tc.content)
			_, err := Load(Options{File: path, Env: testEnv(t)})
			if got := problemLines(t, err); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("empty sections are fine", func(t *testing.T) {
		path := writeFile(t, "config.yaml", "http: {}\nlog: {}\nsession:\n  # write_timeout: 5s\n")
		mustLoad(t, Options{File: path, Env: testEnv(t)})
	})
}

func TestAllProblemsAtOnce(t *testing.T) {
	path := writeFile(t, "config.toml", `
[session]
write_timeout = "0s"
write_timout = "1s"
[log]
level = "loud"
`)
	_, err := Load(Options{File: path, Env: testEnv(t, "SNODOD_EXECUTOR__MAX_QUEUE=-1"),
		Overrides: map[string]any{"http.path": "mcp"}})
	want := []string{
		`executor.max_queue: must be a positive integer, got -1 (env SNODOD_EXECUTOR__MAX_QUEUE)`,
		`http.path: must start with / and contain no ?, # or spaces, got "mcp" (flag --http.path)`,
		`log.level: must be "debug", "info", "warn" or "error", got "loud"`,
		`session.write_timeout: must be a positive duration, got "0s"`,
		`unknown key "session.write_timout"; did you mean "session.write_timeout"?`,
	}
	got := problemLines(t, err)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("Error() has %d lines, want %d:\n%s", n, len(want), err)
	}
}

func TestThreeProblemsThreeLines(t *testing.T) {
	path := writeFile(t, "config.yaml", "session:\n  max_line_bytes: 0\nlog:\n  format: xml\nhttp:\n  pth: /x\n")
	_, err := Load(Options{File: path, Env: testEnv(t)})
	want := `unknown key "http.pth"; did you mean "http.path"?
log.format: must be "text" or "json", got "xml"
session.max_line_bytes: must be a positive integer, got 0`
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
}
