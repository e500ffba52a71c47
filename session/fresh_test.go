package session

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// freshEnv names, in a child of the test binary, the one test it runs.
const freshEnv = "SNODOD_SESSION_FRESH_TEST"

// testLogLine is a line of t.Log output in a test's verbose output.
var testLogLine = regexp.MustCompile(`^\s+\w+_test\.go:\d+: `)

// inFreshProcess makes a measurement of the runtime's memory independent
// of whatever else the test binary ran: it reports true in a process
// started for t alone (a new process of this test binary running only
// t), where the caller measures; in any other process it runs that child,
// fails t with the child's output if the child failed, logs what the
// child's test logged, and reports false. Goroutine records, stacks the
// runtime keeps for reuse and half-filled spans that earlier tests left
// would otherwise move the figures (TestIdleFiguresIgnoreEarlierRuns).
func inFreshProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(freshEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), freshEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a process of its own: %v\n%s", t.Name(), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if testLogLine.MatchString(line) {
			t.Log(strings.TrimSpace(line))
		}
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s did not run in its own process:\n%s", t.Name(), out)
	}
	return false
}
