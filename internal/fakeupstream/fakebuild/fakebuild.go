// Package fakebuild builds the fake upstream (internal/fakeupstream) for
// the tests that run it: upstream/'s TestMain, and the tests of packages
// that host it without owning it (daemon/, cmd/snodod), which run it as an
// mcpServers entry of a real daemon.
package fakebuild

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds the fake upstream into a temporary directory of t and
// returns its path. The build cache makes a second build cheap.
func Build(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fakeupstream")
	if err := To(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// To builds the fake upstream at path, for a TestMain (which has no
// testing.TB); the error quotes the compiler's output.
func To(path string) error {
	out, err := exec.Command("go", "build", "-o", path, "github.com/snodod/snodod/internal/fakeupstream").CombinedOutput()
	if err != nil {
		return fmt.Errorf("build the fake upstream: %v\n%s", err, out)
	}
	return nil
}
