package proc_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// A child started by StartKept outlives its parent's SIGKILL (no
// parent-death signal), and another process adopts it: Stop ends it with
// SIGTERM, which its new parent (this test, a subreaper) reaps, and Wait
// says its status is not the adopter's to know.
func TestStartKeptAdopt(t *testing.T) {
	proctest.Cleanup(t)
	parent, child := helper(t, "kept")
	st, err := proc.StartTime(child)
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	g, err := proc.Adopt(child, st, markerOf(t, child))
	if err != nil {
		t.Fatalf("Adopt after the parent's death: %v", err)
	}
	if err := g.Stop(time.Minute); !errors.Is(err, proc.ErrNotChild) {
		t.Errorf("Stop = %v, want ErrNotChild", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(child, &ws, 0, nil); err != nil {
		t.Fatalf("reap the adopted child: %v", err)
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("the kept child ended with %v, want SIGTERM (SIGKILL: the parent-death signal)", ws)
	}
}

// Adopt refuses a pid whose start time is not the recorded one (reused).
func TestAdoptRefusesReusedPID(t *testing.T) {
	proctest.Cleanup(t)
	g, _ := shell(t, "exec sleep 1000")
	defer g.Stop(0)
	if _, err := proc.Adopt(g.PID(), g.StartTime()+1, g.Marker()); err == nil {
		t.Fatal("Adopt accepted another start time")
	}
}

// markerOf reads MarkerEnv from pid's environment.
func markerOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(proc.MarkerEnv+"=")); ok {
			return string(v)
		}
	}
	t.Fatalf("process %d has no %s", pid, proc.MarkerEnv)
	return ""
}
