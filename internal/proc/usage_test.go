package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

func TestParseUsage(t *testing.T) {
	// utime 250 ticks, stime 50, rss 3 pages.
	line := "42 (a) b) S 1 42 42 0 -1 0 0 0 0 0 250 50 0 0 20 0 1 0 12345 100 3 0"
	cpu, rss, err := parseUsage([]byte(line))
	if err != nil || cpu != 3*time.Second || rss != 3*int64(os.Getpagesize()) {
		t.Errorf("parseUsage = %v, %d, %v; want 3s, 3 pages", cpu, rss, err)
	}
	if _, _, err := parseUsage([]byte("42 (short) S 1 2 3")); err == nil {
		t.Error("a short line parsed")
	}
}

// A tree's usage counts its leader and a child of it; a pid that does not
// exist fails.
func TestTreeUsage(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	var u Usage
	eventually.True(t, "the shell's child is in its tree", func() bool {
		var err error
		u, err = TreeUsage(cmd.Process.Pid)
		return err == nil && u.Processes == 2
	})
	if u.RSS <= 0 {
		t.Errorf("usage %+v, want 2 processes and some memory", u)
	}
	if _, err := TreeUsage(1 << 30); err == nil {
		t.Error("a pid that does not exist has usage")
	}
}
