// Package fakebuild builds the fake upstream (internal/fakeupstream) for
// the tests of packages that host it without owning it (daemon/,
// cmd/snodod): they run it as an mcpServers entry of a real daemon.
package fakebuild

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds the fake upstream into a temporary directory of t and
// returns its path. The build cache makes a second build cheap.
func Build(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fakeupstream")
	out, err := exec.Command("go", "build", "-o", path, "github.com/snodod/snodod/internal/fakeupstream").CombinedOutput()
	if err != nil {
		t.Fatalf("build the fake upstream: %v\n%s", err, out)
	}
	return path
}
