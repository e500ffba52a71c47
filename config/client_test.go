package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A client needs only the socket paths: a typo elsewhere in the file, a
// stray variable or a file that does not parse is a warning, and the
// sockets still come from every layer that could be read: connect,
// status and kill once refused to start over a typo they do not read.
func TestLoadClient(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        []string
		warnings   []string
		socket     string
	}{
		{"clean", "[daemon]\nsocket = \"/x/s.sock\"\n", nil, nil, "/x/s.sock"},
		{"typo", "[log]\nlevl = \"debug\"\n[daemon]\nsocket = \"/x/s.sock\"\n", nil,
			[]string{`unknown key "log.levl"; did you mean "log.level"?`}, "/x/s.sock"},
		{"bad value", "[session]\nwrite_timeout = 5\n[daemon]\nsocket = \"/x/s.sock\"\n", nil,
			[]string{`session.write_timeout: must be a positive duration with a unit, such as "30s", got 5`}, "/x/s.sock"},
		{"stray variable", "[daemon]\nsocket = \"/x/s.sock\"\n", []string{"SNODOD_LOG__LEVL=debug"},
			[]string{"unknown variable SNODOD_LOG__LEVL; did you mean SNODOD_LOG__LEVEL?"}, "/x/s.sock"},
		{"no parse", "[daemon\nsocket = \"/x/s.sock\"\n", []string{"SNODOD_DAEMON__SOCKET=/y/s.sock"},
			[]string{"config file "}, "/y/s.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.toml", tc.file)
			c, warnings, err := LoadClient(Options{File: path, Env: testEnv(t, tc.env...)})
			if err != nil {
				t.Fatalf("LoadClient: %v", err)
			}
			var lines []string
			for _, w := range warnings {
				var ve *ValidationError
				if errors.As(w, &ve) {
					for _, p := range ve.Problems {
						lines = append(lines, p.String())
					}
				} else {
					lines = append(lines, w.Error())
				}
			}
			if len(lines) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %q", lines, tc.warnings)
			}
			for i := range lines {
				if !strings.HasPrefix(lines[i], tc.warnings[i]) {
					t.Errorf("warning %q, want %q", lines[i], tc.warnings[i])
				}
			}
			if c.Daemon.Socket != tc.socket || c.Daemon.ControlSocket != strings.TrimSuffix(tc.socket, "s.sock")+"control.sock" {
				t.Errorf("sockets %q %q", c.Daemon.Socket, c.Daemon.ControlSocket)
			}
			if _, err := Load(Options{File: path, Env: testEnv(t, tc.env...)}); (err != nil) != (len(tc.warnings) > 0) {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

// The sockets' own problems, and an explicit file that is missing, are
// errors still.
func TestLoadClientErrors(t *testing.T) {
	path := writeFile(t, "config.toml", "[daemon]\nsocket = \"relative.sock\"\n[log]\nlevl = 1\n")
	_, _, err := LoadClient(Options{File: path, Env: testEnv(t)})
	if got := problemLines(t, err); !slices.Contains(got, `daemon.socket: must be an absolute path of at most 107 bytes, got "relative.sock"`) {
		t.Errorf("problems %q", got)
	}
	_, _, err = LoadClient(Options{File: path + ".missing", Env: testEnv(t)})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// With the default socket paths, a client also looks where a daemon
// started in another environment would listen; with a configured path,
// only there.
func TestDefaultSocketDirs(t *testing.T) {
	tmp := t.TempDir()
	id := strconv.Itoa(os.Getuid())
	c := mustLoad(t, Options{Env: testEnv(t, "TMPDIR="+tmp)}) // XDG_RUNTIME_DIR=/run/test
	got := c.DefaultSocketDirs()
	want := []string{filepath.Join(tmp, "snodod-"+id), "/tmp/snodod-" + id}
	if _, err := os.Stat("/run/user/" + id); err == nil {
		want = append([]string{"/run/user/" + id + "/snodod"}, want...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("DefaultSocketDirs() = %q, want %q", got, want)
	}
	c = mustLoad(t, Options{Env: testEnv(t, "SNODOD_DAEMON__SOCKET=/x/s.sock")})
	if got := c.DefaultSocketDirs(); got != nil {
		t.Errorf("with a configured socket: %q", got)
	}
}

// An embedder's own prefix replaces SNODOD_ for the variables: the
// default's are then not configuration, and messages name the new ones.
func TestEnvPrefix(t *testing.T) {
	c := mustLoad(t, Options{EnvPrefix: "MYAPP_", Env: testEnv(t,
		"MYAPP_SESSION__WRITE_TIMEOUT=2s", "SNODOD_SESSION__WRITE_TIMEOUT=3s")})
	if c.Limits.WriteTimeout != 2*time.Second || c.Source("session.write_timeout").String() != "env MYAPP_SESSION__WRITE_TIMEOUT" {
		t.Errorf("write_timeout %v from %s", c.Limits.WriteTimeout, c.Source("session.write_timeout"))
	}
	_, err := Load(Options{EnvPrefix: "MYAPP_", Env: testEnv(t, "MYAPP_SESSION__WRITE_TIMOUT=1s", "MYAPP_LOG_LEVEL=debug")})
	want := []string{
		"MYAPP_LOG_LEVEL is not a configuration variable; did you mean MYAPP_LOG__LEVEL? (a double underscore separates the section from the key)",
		"unknown variable MYAPP_SESSION__WRITE_TIMOUT; did you mean MYAPP_SESSION__WRITE_TIMEOUT?",
	}
	if got := problemLines(t, err); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// A client does not decode the entry sections: a hosted server whose
// secret file is missing and whose command is on no PATH, which Load
// refuses, costs it no file read, no lookup and no warning.
func TestLoadClientSkipsEntries(t *testing.T) {
	file := "[daemon]\nsocket = \"/x/s.sock\"\n" +
		"[mcpServers.gh]\ncommand = \"no-such-program-snodod\"\nenv = { TOKEN = \"${file:/no/such/secret}\" }\n" +
		"[tools.t]\ncommand = [\"no-such-program-snodod\"]\n"
	path := writeFile(t, "config.toml", file)
	if _, err := Load(Options{File: path, Env: testEnv(t)}); err == nil {
		t.Fatal("Load accepted the entries; the test needs entries it refuses")
	}
	c, warnings, err := LoadClient(Options{File: path, Env: testEnv(t)})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("LoadClient: %v, warnings %v", err, warnings)
	}
	if c.Daemon.Socket != "/x/s.sock" || len(c.MCPServers) != 0 || len(c.Tools) != 0 {
		t.Errorf("sockets %q, hosted servers %d, tools %d", c.Daemon.Socket, len(c.MCPServers), len(c.Tools))
	}
}
