package catalog_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/server"
)

// escapeeTool is an exec tool whose run starts `setsid sleep 300` (its
// process leaves the run's group and session) and writes the sleep's pid
// to pidfile before it exits, or, with wait, before it waits for it.
func escapeeTool(name, pidfile string, wait bool, extra string) string {
	// $$$$ is the shell's $$: the configuration's expansion makes $$ a $.
	script := `setsid sh -c 'echo $$$$ > "$0"; exec sleep 300' "$1" & while [ ! -s "$1" ]; do sleep 0.01; done`
	if wait {
		script += "; wait"
	}
	return fmt.Sprintf("[tools.%s]\ncommand = [\"/bin/sh\", \"-c\", %q, \"sh\", %q]\n%s\n", name, script, pidfile, extra)
}

// TestExecRunLeavesNothing: a run's descendant that called setsid is ended
// with the run: when the run exits, when it times out, and when its call
// is cancelled (docs/architecture.md §6).
func TestExecRunLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	pidfile := func(name string) string { return filepath.Join(dir, name+".pid") }
	c := execHost(t, dir, escapeeTool("exits", pidfile("exits"), false, "")+
		escapeeTool("slow", pidfile("slow"), true, `timeout = "1s"`)+
		escapeeTool("patient", pidfile("patient"), true, ""))

	if res := callTool(t, c, t.Context(), "exits", nil); res.IsError {
		t.Fatalf("exits: %+v", res)
	}
	expectGone(t, []int{proctest.ReadPIDFile(t, pidfile("exits"))})

	if res := callTool(t, c, t.Context(), "slow", nil); !res.IsError {
		t.Fatalf("slow: %+v, want it timed out", res)
	}
	expectGone(t, []int{proctest.ReadPIDFile(t, pidfile("slow"))})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan server.Outcome, 1)
	go func() { done <- c.dispatch(ctx, "tools/call", map[string]any{"name": "patient"}) }()
	pid := awaitPid(t, pidfile("patient"))
	cancel()
	select {
	case <-done:
	case <-time.After(catalog.StopGrace + 10*time.Second):
		t.Fatal("the cancelled call did not return")
	}
	expectGone(t, []int{pid})
}

// TestExecRunRecorded: a run's process group is in the daemon's record
// while it runs, and out of it once it ended (docs/upstreams.md §4).
func TestExecRunRecorded(t *testing.T) {
	dir := t.TempDir()
	rec, err := proc.OpenGroupRecord(filepath.Join(dir, "state", "groups"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, escapeeTool("patient", filepath.Join(dir, "p.pid"), true, ""))
	_, srv := newHost(t, cfg, catalog.HostOptions{Record: func() *proc.GroupRecord { return rec }})
	c := newClient(t, srv, "2025-11-25", `{}`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan server.Outcome, 1)
	go func() { done <- c.dispatch(ctx, "tools/call", map[string]any{"name": "patient"}) }()
	escapee := awaitPid(t, filepath.Join(dir, "p.pid"))
	var groups []string // recorded just after the start: soon
	if !eventually.Within(eventually.Timeout, func() bool { groups = recorded(t, rec.Path()); return len(groups) == 1 }) {
		t.Fatalf("record while the run runs: %q, want its group", groups)
	}
	leader, _ := strconv.Atoi(strings.Fields(groups[0])[0])
	if p, err := proc.ReadProcess(escapee); err != nil || p.PPID != leader {
		t.Fatalf("the recorded group %d is not the run's (its escapee's parent is %d, %v)", leader, p.PPID, err)
	}
	cancel()
	<-done
	if groups := recorded(t, rec.Path()); len(groups) != 0 {
		t.Errorf("record after the run: %q, want no group", groups)
	}
}

// recorded returns the group lines of the record at path.
func recorded(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")[3:] // after the header, boot and daemon lines
}

func awaitPid(t *testing.T, path string) int {
	t.Helper()
	if !eventually.Within(30*time.Second, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n")
	}) {
		t.Fatalf("no pid in %s", path)
	}
	return proctest.ReadPIDFile(t, path)
}
