package proc

import (
	"os"
	"os/exec"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		in      string
		want    Process
		wantErr bool
	}{
		{"42 (sleep) S 1 42 42 0 -1 4194304 100 0 0 0 5 3 2 1 20 0 1 0 12345 100 7 0", Process{PPID: 1, PGID: 42, StartTime: 12345, State: 'S', CPUTicks: 11, RSSPages: 7}, false},
		{"42 (a) (b) c) R 7 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 1 1", Process{PPID: 7, PGID: 9, StartTime: 99, State: 'R', RSSPages: 1}, false},
		{"42 (short) S 1 2 3", Process{}, true},
		{"42 no-name S", Process{}, true},
		{"42 (x) S one 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 1 1", Process{}, true},
	}
	for _, tt := range tests {
		got, err := parseStat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestTreeUsage: a tree's usage counts its descendants: a child that
// allocates and touches memory raises the tree's RSS above the leader's
// own.
func TestTreeUsage(t *testing.T) {
	self, err := TreeUsage(os.Getpid())
	if err != nil || self.RSSBytes <= 0 || self.CPU < 0 {
		t.Fatalf("this process: %+v, %v", self, err)
	}
	// Not through a shell: killing the shell would orphan its sleep to this
	// process (a subreaper in TestMain) and fail the next test's leak check.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	own, _ := ReadProcess(os.Getpid())
	eventually.True(t, "the child in the tree's RSS", func() bool {
		u, err := TreeUsage(os.Getpid())
		return err == nil && u.RSSBytes > own.RSSPages*int64(os.Getpagesize())
	})
	if _, err := TreeUsage(1 << 30); err == nil {
		t.Error("TreeUsage of no process succeeded")
	}
}
