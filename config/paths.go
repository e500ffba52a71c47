package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultFile returns the configuration file Load reads when Options.File
// is empty: $XDG_CONFIG_HOME/snodod/config.toml when XDG_CONFIG_HOME is an
// absolute path, else $HOME/.config/snodod/config.toml, else "" (no default
// file). env is in os.Environ form; nil means the process's environment.
func DefaultFile(env []string) string {
	return defaultFile(envMap(env))
}

// DefaultSecretsDir returns the directory `snodod import` writes secrets
// to, each in a file of its own: $XDG_CONFIG_HOME/snodod/secrets when
// XDG_CONFIG_HOME is an absolute path, else ~/.config/snodod/secrets, else
// "". env is in os.Environ form; nil means the process's environment.
func DefaultSecretsDir(env []string) string {
	if f := defaultFile(envMap(env)); f != "" {
		return filepath.Join(filepath.Dir(f), "secrets")
	}
	return ""
}

func defaultFile(env map[string]string) string {
	if d := env["XDG_CONFIG_HOME"]; filepath.IsAbs(d) {
		return filepath.Join(d, "snodod", "config.toml")
	}
	if h := env["HOME"]; h != "" {
		return filepath.Join(h, ".config", "snodod", "config.toml")
	}
	return ""
}

// envMap turns an os.Environ-form list into a map; nil means the process's
// environment. A later entry wins over an earlier one of the same name, as
// in the environment provider.
func envMap(env []string) map[string]string {
	if env == nil {
		env = os.Environ()
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// runtimePrefix starts the default socket paths.
const runtimePrefix = "${XDG_RUNTIME_DIR}/snodod/"

// expandPath expands a socket path with the one expander (expand.go): a
// socket path may use ${VAR}, ${VAR:-default} and $$. It returns the path,
// or the problem when it cannot be expanded.
//
// One exception keeps the default working outside a login session (sudo,
// cron, a system unit), where XDG_RUNTIME_DIR is often unset: a path that
// starts with ${XDG_RUNTIME_DIR}/snodod/ then starts with runtimeFallback's
// directory instead.
func expandPath(p string, env map[string]string) (expanded, problem string) {
	if env["XDG_RUNTIME_DIR"] == "" {
		if rest, ok := strings.CutPrefix(p, runtimePrefix); ok {
			dir := runtimeFallback("/run/user", tempDir(env), os.Getuid())
			p = strings.ReplaceAll(dir, "$", "$$") + "/" + rest
		}
	}
	x := &expander{env: env, field: "a socket path"}
	return x.expand(p, 0)
}

// bareVariable returns the first $NAME of s that is not ${NAME} (nor
// $$NAME): such a name is not expanded, and a path that holds one was
// most likely written for a shell.
func bareVariable(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j > i+1 {
			return s[i+1 : j]
		}
	}
	return ""
}

// runtimeFallback is snodod's runtime directory when XDG_RUNTIME_DIR is
// unset: <runUser>/<uid>/snodod when <runUser>/<uid> is a directory
// (systemd-logind keeps /run/user/<uid> for a user with a session even
// where the variable was lost), else <tmp>/snodod-<uid>, named per user so
// that users sharing /tmp cannot take each other's directory.
func runtimeFallback(runUser, tmp string, uid int) string {
	id := strconv.Itoa(uid)
	if fi, err := os.Stat(filepath.Join(runUser, id)); err == nil && fi.IsDir() {
		return filepath.Join(runUser, id, "snodod")
	}
	return filepath.Join(tmp, "snodod-"+id)
}

// resolvePath makes p absolute: ~ and ~/ are home, and a relative path is
// taken from base (the configuration file's directory; the working
// directory when base is "").
func resolvePath(p, home, base string) string {
	if p == "~" {
		p = home
	} else if rest, ok := strings.CutPrefix(p, "~/"); ok {
		p = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(p) {
		if base == "" {
			base, _ = os.Getwd()
		}
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// tempDir is os.TempDir read from env rather than the process: $TMPDIR,
// else /tmp.
func tempDir(env map[string]string) string {
	if d := env["TMPDIR"]; filepath.IsAbs(d) {
		return filepath.Clean(d)
	}
	return "/tmp"
}
