// Package fakebuild builds the fake upstream (internal/fakeupstream) for
// the tests that run it: the TestMain of mcpclient/ and upstream/ (Main),
// and the tests of packages that host it without owning it (daemon/,
// cmd/snodod), which run it as an mcpServers entry of a real daemon.
package fakebuild

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/proc/proctest"
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

// Main is the TestMain of a package whose tests run the fake upstream: it
// builds it once into a temporary directory (*path), makes the test
// process a child subreaper so that a leaked grandchild shows up as its
// child (proctest), runs the tests and checks for leaked goroutines at the
// end, and exits.
func Main(m *testing.M, path *string) {
	dir, err := os.MkdirTemp("", "snodod-fake-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	*path = filepath.Join(dir, "fakeupstream")
	if err := To(*path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(2)
	}
	if err := proctest.Subreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		_ = os.RemoveAll(dir)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// History is what the fake saw, as its history tool answers it.
type History struct {
	Requests []struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Tool   string          `json:"tool"`
	} `json:"requests"`
	Cancelled []struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	} `json:"cancelled"`
}

// BehaviourTools is how many behaviour tools the fake lists before its
// -tools extras (echo … flood).
const BehaviourTools = 15
