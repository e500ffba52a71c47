package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// testEnv is an environment with no configuration in it: no default file
// (XDG_CONFIG_HOME is an empty directory) and a known runtime directory, so
// socket paths are predictable. extra entries are appended.
func testEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	env := []string{
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"XDG_RUNTIME_DIR=/run/test",
		"HOME=" + t.TempDir(),
	}
	return append(env, extra...)
}

// writeFile writes content to name in a new temporary directory and
// returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustLoad loads opts and fails the test on any error.
func mustLoad(t *testing.T, opts Options) *Config {
	t.Helper()
	c, err := Load(opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// problemLines returns the lines of err, which must be a
// *ValidationError.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	lines := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		lines[i] = p.String()
	}
	return lines
}
