package session

import (
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestIdleFiguresIgnoreEarlierRuns pins a bug of the idle measurements:
// they measured the test binary's process, so what ran before them moved
// their figures. A second run of TestIdleCoordinatorStack in one process
// measured 4.3 KiB of stack per session where the first measured 6.5 KiB
// (the stacks the first run's sessions left in the runtime's cache are
// reused without growing StackInuse), and a shuffled order that ran
// TestIdleSessionCost first did the same: the stack test could no longer
// see a coordinator outgrow its stack. Each test now measures in a
// process of its own (inFreshProcess), so two runs agree.
func TestIdleFiguresIgnoreEarlierRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the idle tests twice")
	}
	for _, tc := range []struct {
		test   string
		figure *regexp.Regexp
	}{
		{"TestIdleCoordinatorStack", regexp.MustCompile(`stack per idle session: (\d+) B`)},
		{"TestIdleSessionCost", regexp.MustCompile(`heap per idle session: (\d+) B`)},
	} {
		t.Run(tc.test, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^"+tc.test+"$", "-test.count=2", "-test.v")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s -test.count=2: %v\n%s", tc.test, err, out)
			}
			var figures []float64
			for _, m := range tc.figure.FindAllSubmatch(out, -1) {
				f, _ := strconv.ParseFloat(string(m[1]), 64)
				figures = append(figures, f)
			}
			if len(figures) != 2 {
				t.Fatalf("%s -test.count=2 printed %d figures, want 2:\n%s", tc.test, len(figures), out)
			}
			t.Logf("%s: %v B per session", tc.test, figures)
			// Fresh processes measure the same sessions the same way; the
			// rest is the noise of a collection's timing.
			if diff := math.Abs(figures[0]-figures[1]) / max(figures[0], figures[1]); diff > 0.1 {
				t.Errorf("%s measured %.0f B, then %.0f B in a second run: the figure depends on what ran before it", tc.test, figures[0], figures[1])
			}
		})
	}
}
