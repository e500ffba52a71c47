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

// runtimePrefixes are the spellings of the default socket directory.
var runtimePrefixes = []string{"$XDG_RUNTIME_DIR/snodod/", "${XDG_RUNTIME_DIR}/snodod/"}

// expandPath expands $VAR and ${VAR} in a socket path from env. It returns
// the name of the first variable that is unset or empty, if any, and then
// the path is not usable.
//
// One exception keeps the default working outside a login session (sudo,
// cron, a system unit), where XDG_RUNTIME_DIR is often unset: a path that
// starts with $XDG_RUNTIME_DIR/snodod/ then starts with runtimeFallback's
// directory instead.
func expandPath(p string, env map[string]string) (expanded, missing string) {
	if env["XDG_RUNTIME_DIR"] == "" {
		for _, prefix := range runtimePrefixes {
			if rest, ok := strings.CutPrefix(p, prefix); ok {
				p = runtimeFallback("/run/user", tempDir(env), os.Getuid()) + "/" + rest
				break
			}
		}
	}
	expanded = os.Expand(p, func(name string) string {
		v := env[name]
		if v == "" && missing == "" {
			missing = name
		}
		return v
	})
	return expanded, missing
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

// tempDir is os.TempDir read from env rather than the process: $TMPDIR,
// else /tmp.
func tempDir(env map[string]string) string {
	if d := env["TMPDIR"]; filepath.IsAbs(d) {
		return filepath.Clean(d)
	}
	return "/tmp"
}
