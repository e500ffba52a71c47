package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The extension scenarios the OAuth client is meant to pass, which no SDK
// client did when it was written.
var wantedExtensions = []string{"auth/client-credentials-jwt", "auth/client-credentials-basic", "auth/dpop", "auth/dpop-nonce"}

var (
	clientOnce sync.Once
	clientBin  string
	clientErr  error
)

// conformanceClient builds e2e/conformance/client (with -race), the
// test-only MCP client of mcpclient/oauth; its `browse` mode is the
// headless browser $BROWSER names.
func conformanceClient(t *testing.T) string {
	t.Helper()
	clientOnce.Do(func() {
		// Beside snodod's binary, in the directory TestMain removes.
		clientBin = filepath.Join(filepath.Dir(binary), "conformance-client")
		out, err := exec.Command("go", "build", "-race", "-o", clientBin, "github.com/snodod/snodod/e2e/conformance/client").CombinedOutput()
		if err != nil {
			clientErr = err
			t.Logf("%s", out)
		}
	})
	if clientErr != nil {
		t.Fatalf("building the conformance client: %v", clientErr)
	}
	return clientBin
}

// totalLine is the suite's "Total: 469 passed, 3 failed, 0 warnings".
var totalLine = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)

// passingUnscored reads the "Not scored" section's passing scenarios.
var passingUnscored = regexp.MustCompile(`(?m)^\s+✓ (\S+) \(`)

// TestClientConformance runs the official conformance suite's client
// scenarios (`client --requirements`, 2025-11-25 and 2026-07-28) with
// e2e/conformance/client as the client: mcpclient/oauth authorizing, a
// minimal Streamable HTTP client for the rest, logins completed headless
// through $BROWSER. It fails naming each scored scenario that fails, and
// each of the client-credentials and DPoP extension scenarios that does
// not pass; it logs the figures.
//
// Through snodod, the same client command starts snodod with the
// scenario's URL as a remote upstream and does the scenario with the
// official Go SDK's client through snodod connect (client/snodod.go): the
// same requirements hold.
func TestClientConformance(t *testing.T) {
	node, dir := conformanceNode(t)
	bin := conformanceClient(t)
	for _, run := range []struct{ rev, via string }{{"2025-11-25", ""}, {"2026-07-28", ""}, {"2025-11-25", "snodod"}, {"2026-07-28", "snodod"}} {
		rev := run.rev
		name := rev
		if run.via != "" {
			name += " through " + run.via
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			results := t.TempDir()
			cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules", conformanceRuns[1].pkg, "dist", "index.js"),
				"client", "--command", bin, "--requirements", rev, "-o", results)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "BROWSER="+bin+" browse")
			if run.via != "" {
				cmd.Env = append(cmd.Env, "SNODOD_CONFORMANCE_VIA="+binary)
			}
			out, total := runSuite(t, cmd)
			failed, _ := scoredFailures(out)
			var passedExt []string
			for _, m := range passingUnscored.FindAllStringSubmatch(string(out), -1) {
				passedExt = append(passedExt, m[1])
			}
			for _, name := range wantedExtensions {
				if !slices.Contains(passedExt, name) {
					t.Errorf("extension scenario %s did not pass", name)
				}
			}
			checkNoRace(t, results)
			for _, name := range failed {
				logScenario(t, results, name)
			}
			checks := "?"
			if m := totalLine.FindSubmatch(out); m != nil {
				checks = string(m[1]) + " checks passed, " + string(m[2]) + " failed"
			}
			if t.Failed() {
				t.Logf("the suite's output:\n%s", out)
			}
			t.Logf("%s: %d scenarios, %s, %d scored failures; not scored but passing: %s", name, total, checks, len(failed), strings.Join(passedExt, ", "))
		})
	}
}

// checkNoRace fails the test when a scenario's client reported a data
// race (its stderr is in the suite's results).
func checkNoRace(t *testing.T, results string) {
	t.Helper()
	_ = filepath.WalkDir(results, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "stderr.txt" {
			return nil
		}
		if data, _ := os.ReadFile(path); bytes.Contains(data, []byte("DATA RACE")) {
			t.Errorf("the race detector reported a race in the client (%s):\n%s", filepath.Base(filepath.Dir(path)), data)
		}
		return nil
	})
}

// logScenario logs what a failing scenario's results say: its checks
// that did not succeed, and the end of the client's standard error.
func logScenario(t *testing.T, results, name string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(results, name+"-*"))
	for _, dir := range dirs {
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		b, _ := os.ReadFile(filepath.Join(dir, "checks.json"))
		_ = json.Unmarshal(b, &checks)
		var bad []string
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				bad = append(bad, c.ID+" "+c.Status+": "+c.ErrorMessage)
			}
		}
		stderr, _ := os.ReadFile(filepath.Join(dir, "stderr.txt"))
		if len(stderr) > 4096 {
			stderr = stderr[len(stderr)-4096:]
		}
		t.Logf("%s: %s\nthe client's stderr (its end):\n%s", name, strings.Join(bad, "\n"), stderr)
	}
}
