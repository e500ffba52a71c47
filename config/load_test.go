package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/limits"
)

// wantDefaults is the configuration with nothing set, under testEnv: the
// values the specs (docs/transport.md §15, docs/protocol.md §13.5) and the issue fix.
var wantDefaults = Config{
	Limits: limits.Limits{
		WriteTimeout: 5 * time.Second, MaxLineBytes: 2000000, MaxSubscriptions: 32,
		RequestTimeout: 30 * time.Second, RestartIntensity: 5, RestartWindow: 10 * time.Second,
		MaxConcurrency: 32, MaxQueue: 256, MaxSessions: 1024, MaxSessionsPerUID: 256, InitializeTimeout: 30 * time.Second,
		ShutdownGrace: 10 * time.Second, UpgradeGrace: 10 * time.Second,
		MaxBufferedBytes: 64000000, MaxPendingOutputBytes: 8000000,
	},
	Daemon: Daemon{
		Socket: "/run/test/snodod/snodod.sock", ControlSocket: "/run/test/snodod/control.sock",
		AllowedUIDs: []int{},
	},
	Protocol: Protocol{Versions: []string{"2026-07-28", "2025-11-25", "2025-06-18"}},
	Server:   Server{Name: "snodod", CacheScope: "private"},
	HTTP: HTTP{
		Path: "/mcp", MaxBodyBytes: 2000000, AllowedOrigins: []string{},
		MaxSubscriptions: 256, SessionIdleTimeout: 30 * time.Minute,
		MaxSessions: 1024, MaxSessionsPerPeer: 256, AllowedHosts: []string{}, Tokens: []string{}, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 65536,
	},
	Admin: Admin{NativeHistograms: true, MaxViewers: 100, ViewerWriteTimeout: 5 * time.Second},
	Audit: Audit{MaxSize: 104857600, MaxFiles: 5},
	Log:   Log{Level: "info", Format: "text"},
	Upstreams: Upstreams{
		Import: []string{}, MaxChildren: 64, MaxInFlight: 32, MaxQueued: 64, MaxParked: 32, MaxServerRequests: 32,
		StderrBytes: 65536, StderrTotalBytes: 8388608, DrainTimeout: time.Minute, ListWait: 5 * time.Second, Always: []string{},
	},
	Sandbox: sandbox.Policy{Level: DefaultSandboxLevel}, // no file: the embedded defaults are a new configuration
}

// sections returns c's exported part, for comparisons.
func sectionsOf(c *Config) Config {
	out := *c
	out.file, out.sources, out.env = "", nil, nil
	return out
}

func TestDefaultsWithNoFile(t *testing.T) {
	c := mustLoad(t, Options{Env: testEnv(t)})
	if got := sectionsOf(c); !reflect.DeepEqual(got, wantDefaults) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, wantDefaults)
	}
	if c.File() != "" {
		t.Errorf("File() = %q, want none", c.File())
	}
	for key, src := range c.Sources() {
		if src.String() != "default" {
			t.Errorf("%s: source %s, want default", key, src)
		}
	}
}

func TestEachFormatLoads(t *testing.T) {
	files := map[string]string{
		"config.toml": `
[session]
write_timeout = "2s"
max_line_bytes = 1000
[protocol]
versions = ["2025-06-18", "2026-07-28"]
[daemon]
allowed_uids = [1000, 1001]
`,
		"config.yaml": `
session:
  write_timeout: 2s
  max_line_bytes: 1000
protocol:
  versions: [2025-06-18, "2026-07-28"]
daemon:
  allowed_uids: [1000, 1001]
`,
		"config.YML": `
session: {write_timeout: 2s, max_line_bytes: 1000}
protocol: {versions: ["2025-06-18", "2026-07-28"]}
daemon: {allowed_uids: [1000, 1001]}
`,
		"config.json": `{
  "session": {"write_timeout": "2s", "max_line_bytes": 1000},
  "protocol": {"versions": ["2025-06-18", "2026-07-28"]},
  "daemon": {"allowed_uids": [1000, 1001]}
}`,
	}
	want := wantDefaults
	want.Limits.WriteTimeout, want.Limits.MaxLineBytes = 2*time.Second, 1000
	want.Protocol.Versions = []string{"2025-06-18", "2026-07-28"}
	want.Daemon.AllowedUIDs = []int{1000, 1001}
	want.Sandbox.Level = UnsetSandboxLevel // a file without [sandbox]
	for name, content := range files {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, name, content)
			c := mustLoad(t, Options{File: path, Env: testEnv(t)})
			if got := sectionsOf(c); !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
			if c.File() != path {
				t.Errorf("File() = %q, want %q", c.File(), path)
			}
			if src := c.Source("session.write_timeout").String(); src != "file "+path {
				t.Errorf("source %q, want file %s", src, path)
			}
			if src := c.Source("session.request_timeout").String(); src != "default" {
				t.Errorf("unset key's source %q, want default", src)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	path := writeFile(t, "config.toml", `
[session]
write_timeout = "1s"
request_timeout = "11s"
max_line_bytes = 100
[protocol]
versions = ["2025-06-18", "2025-11-25"]
`)
	env := testEnv(t,
		"SNODOD_SESSION__REQUEST_TIMEOUT=12s",
		"SNODOD_SESSION__MAX_LINE_BYTES=200",
		"SNODOD_EXECUTOR__MAX_QUEUE=7",
		"SNODOD_PROTOCOL__VERSIONS=2026-07-28",
	)
	c := mustLoad(t, Options{
		File: path, Env: env,
		Overrides: map[string]any{"session.max_line_bytes": 300, "log.level": "debug"},
		Flags:     map[string]string{"session.max_line_bytes": "--max-line-bytes"},
	})
	for _, tc := range []struct {
		key    string
		value  any
		source string
	}{
		{"session.max_subscriptions", 32, "default"},
		{"session.write_timeout", time.Second, "file " + path},
		{"session.request_timeout", 12 * time.Second, "env SNODOD_SESSION__REQUEST_TIMEOUT"},
		{"executor.max_queue", 7, "env SNODOD_EXECUTOR__MAX_QUEUE"},
		{"session.max_line_bytes", 300, "flag --max-line-bytes"},
		{"log.level", "debug", "flag --log.level"},
		// A list is replaced whole, never merged.
		{"protocol.versions", []string{"2026-07-28"}, "env SNODOD_PROTOCOL__VERSIONS"},
	} {
		if got := fieldValue(c, specByName[tc.key]); !reflect.DeepEqual(got, tc.value) {
			t.Errorf("%s = %v, want %v", tc.key, got, tc.value)
		}
		if got := c.Source(tc.key).String(); got != tc.source {
			t.Errorf("%s: source %q, want %q", tc.key, got, tc.source)
		}
	}
}

func TestDefaultFile(t *testing.T) {
	const content = "[log]\nlevel = \"warn\"\n"
	t.Run("XDG_CONFIG_HOME", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "snodod", "config.toml")
		writeAt(t, path, content)
		c := mustLoad(t, Options{Env: []string{"XDG_CONFIG_HOME=" + dir, "XDG_RUNTIME_DIR=/run/test"}})
		if c.Log.Level != "warn" || c.File() != path {
			t.Errorf("level %q from %q, want warn from %q", c.Log.Level, c.File(), path)
		}
	})
	t.Run("HOME when XDG_CONFIG_HOME is relative", func(t *testing.T) {
		home := t.TempDir()
		path := filepath.Join(home, ".config", "snodod", "config.toml")
		writeAt(t, path, content)
		env := []string{"XDG_CONFIG_HOME=relative", "HOME=" + home, "XDG_RUNTIME_DIR=/run/test"}
		c := mustLoad(t, Options{Env: env})
		if c.Log.Level != "warn" || c.File() != path {
			t.Errorf("level %q from %q, want warn from %q", c.Log.Level, c.File(), path)
		}
		if got := DefaultFile(env); got != path {
			t.Errorf("DefaultFile = %q, want %q", got, path)
		}
	})
	t.Run("absent is fine", func(t *testing.T) {
		c := mustLoad(t, Options{Env: testEnv(t)})
		if c.File() != "" {
			t.Errorf("File() = %q, want none", c.File())
		}
	})
	t.Run("no HOME, no XDG_CONFIG_HOME", func(t *testing.T) {
		if got := DefaultFile([]string{}); got != "" {
			t.Errorf("DefaultFile = %q, want none", got)
		}
	})
}

func writeAt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExplicitFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := Load(Options{File: path, Env: testEnv(t)})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	if want := "config file " + path + ": no such file or directory"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		line, column  int
		contains      string
	}{
		{"bad.toml", "[session]\nwrite_timeout = \n", 2, 17, "toml:"},
		{"dup.toml", "[log]\nlevel = \"info\"\nlevel = \"warn\"\n", 3, 1, "toml:"},
		{"bad.yaml", "session:\n  write_timeout: 5s\n bad: x\n", 2, 0, "yaml: did not find expected key"}, // YAML reports the mapping's line
		{"x.yaml", "a: [1\n", 1, 0, "yaml:"},
		{"list.yml", "- 1\n- 2\n", 1, 0, "yaml: cannot unmarshal"},
		{"bad.json", "{\n  \"session\": {,}\n}\n", 2, 15, "invalid character ','"},
		{"list.json", "\n[1]", 2, 1, "cannot unmarshal array"},
		{"config.ini", "a = 1\n", 0, 0, "unknown format: the name must end in .toml, .yaml, .yml or .json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.name, tc.content)
			_, err := Load(Options{File: path, Env: testEnv(t)})
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want *FileError", err, err)
			}
			if fe.Path != path || fe.Line != tc.line || (tc.column > 0 && fe.Column != tc.column) {
				t.Errorf("at %s:%d:%d, want %s:%d:%d", fe.Path, fe.Line, fe.Column, path, tc.line, tc.column)
			}
			if !strings.HasPrefix(err.Error(), "config file "+path) || !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("err = %q, want it to name %s and contain %q", err, path, tc.contains)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "config.toml")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Load(Options{File: dir, Env: testEnv(t)})
		var fe *FileError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("err = %v, want a *FileError saying it is a directory", err)
		}
	})
}

func TestEnvironment(t *testing.T) {
	t.Run("values", func(t *testing.T) {
		c := mustLoad(t, Options{Env: testEnv(t,
			"SNODOD_SESSION__WRITE_TIMEOUT=2s",
			"SNODOD_PROTOCOL__VERSIONS=2026-07-28, 2025-06-18",
			"SNODOD_DAEMON__ALLOWED_UIDS=1000,1001",
			"SNODOD_HTTP__ALLOWED_ORIGINS=",
			"snodod_log__level=debug", // not the prefix: ignored
			"SNODOD_log__format=json", // the section and key are read in any case
			"SNODOD_TEST_STDOUT_HELPER=1",
		)})
		if c.Limits.WriteTimeout != 2*time.Second ||
			!slices.Equal(c.Protocol.Versions, []string{"2026-07-28", "2025-06-18"}) ||
			!slices.Equal(c.Daemon.AllowedUIDs, []int{1000, 1001}) ||
			len(c.HTTP.AllowedOrigins) != 0 || c.Log.Level != "info" || c.Log.Format != "json" {
			t.Errorf("got %+v", sectionsOf(c))
		}
	})
	t.Run("problems", func(t *testing.T) {
		_, err := Load(Options{Env: testEnv(t,
			"SNODOD_SESSION__WRITE_TIMEOUT=0s",
			"SNODOD_SESSION__WRITE_TIMOUT=1s",
			"SNODOD_SESSION_MAX_LINE_BYTES=5",
			"SNODOD_EXECUTOR__MAX_QUEUE=many",
		)})
		want := []string{
			"SNODOD_SESSION_MAX_LINE_BYTES is not a configuration variable; did you mean SNODOD_SESSION__MAX_LINE_BYTES? (a double underscore separates the section from the key)",
			"unknown variable SNODOD_SESSION__WRITE_TIMOUT; did you mean SNODOD_SESSION__WRITE_TIMEOUT?",
			`executor.max_queue: must be a positive integer, got "many" (env SNODOD_EXECUTOR__MAX_QUEUE)`,
			`session.write_timeout: must be a positive duration, got "0s" (env SNODOD_SESSION__WRITE_TIMEOUT)`,
		}
		if got := problemLines(t, err); !slices.Equal(got, want) {
			t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestOverrides(t *testing.T) {
	c := mustLoad(t, Options{Env: testEnv(t), Overrides: map[string]any{
		"session.write_timeout":   3 * time.Second,
		"session.request_timeout": "4s",
		"executor.max_queue":      int64(9),
		"protocol.versions":       []string{"2025-06-18"},
		"daemon.allowed_uids":     []int{7},
		"server.instructions":     "be brief",
	}})
	if c.Limits.WriteTimeout != 3*time.Second || c.Limits.RequestTimeout != 4*time.Second ||
		c.Limits.MaxQueue != 9 || !slices.Equal(c.Protocol.Versions, []string{"2025-06-18"}) ||
		!slices.Equal(c.Daemon.AllowedUIDs, []int{7}) || c.Server.Instructions != "be brief" {
		t.Errorf("got %+v", sectionsOf(c))
	}
	_, err := Load(Options{Env: testEnv(t),
		Overrides: map[string]any{"session.nope": 1, "session.max_line_bytes": 0},
		Flags:     map[string]string{"session.nope": "--nope", "session.max_line_bytes": "--max-line-bytes"},
	})
	want := []string{
		`session.max_line_bytes: must be a positive integer, got 0 (flag --max-line-bytes)`,
		`unknown key "session.nope" (flag --nope)`,
	}
	if got := problemLines(t, err); !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheck(t *testing.T) {
	// Check judges the file alone: the environment's settings are not read.
	t.Setenv("SNODOD_SESSION__WRITE_TIMEOUT", "0s")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	good := writeFile(t, "good.yaml", "log:\n  level: warn\n")
	if err := Check(good); err != nil {
		t.Errorf("Check(good) = %v", err)
	}
	if err := Check(""); err != nil {
		t.Errorf("Check with no default file = %v", err)
	}
	bad := writeFile(t, "bad.toml", "[log]\nlevel = \"loud\"\n")
	want := []string{`log.level: must be "debug", "info", "warn" or "error", got "loud"`}
	if got := problemLines(t, Check(bad)); !slices.Equal(got, want) {
		t.Errorf("Check(bad) = %q, want %q", got, want)
	}
	var ve *ValidationError
	if errors.As(Check(bad), &ve) && ve.File != bad {
		t.Errorf("ValidationError.File = %q, want %q", ve.File, bad)
	}
	if err := Check(filepath.Join(t.TempDir(), "missing.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check(missing) = %v, want fs.ErrNotExist", err)
	}
}
