package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/mcpclient"
)

const handOverConfig = `
[mcpServers.fake]
command = "FAKE"
start = "eager"

[mcpServers.lazy]
command = "FAKE"
`

// A manager told to keep its servers hands the ready shared one over as
// it stops (the lazy one never ran: nothing to hand); a manager that
// adopts it before it serves is ready on the same process, with its
// history (one initialize, the call made before) and no restart counted,
// and stops it when it stops.
func TestHandOverBetweenManagers(t *testing.T) {
	h := newHarness(t, handOverConfig)
	eventually.True(t, "the fake ready", func() bool { return h.row("fake", "").State == StateReady })
	pid := h.row("fake", "").PID
	c := h.connect("", t.TempDir(), "2025-06-18")
	if got := text(t, c.call("tools/call", fakeTool("fake__echo", `{"before":1}`))); !strings.Contains(got, "before") {
		t.Fatalf("echo: %s", got)
	}
	c.gone()
	h.m.KeepServers()
	h.stop()
	kept := h.m.KeptServers()
	if len(kept) != 1 || kept[0].Name != "fake" || kept[0].Conn.PID != pid || len(kept[0].Files) != 3 {
		t.Fatalf("kept %+v; want the fake (pid %d) with its three pipes", kept, pid)
	}
	if !proctest.Alive(pid) {
		t.Fatalf("the fake (pid %d) was stopped, not handed over", pid)
	}

	m2, stop := adoptingManager(t, handOverConfig, kept)
	defer stop()
	eventually.True(t, "the adopted fake ready", func() bool { return rowOf(m2, "fake").State == StateReady })
	if r := rowOf(m2, "fake"); r.PID != pid || r.Restarts != 0 {
		t.Errorf("adopted: pid %d, %d restarts; want %d, none", r.PID, r.Restarts, pid)
	}
	res, err := instanceConn(m2, "fake").Call(t.Context(), "tools/call", json.RawMessage(fakeTool("history", "")), mcpclient.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if inits, echoes := strings.Count(string(res), `"method":"initialize"`), strings.Count(string(res), `"tool":"echo"`); inits != 1 || echoes != 1 {
		t.Errorf("the adopted fake's history: %d initialize, %d echo; want 1 and 1: %.400s", inits, echoes, res)
	}
	stop()
	eventually.True(t, "the adopted fake's end", func() bool { return !proctest.Alive(pid) })
}

// A server whose entry changed is not adopted: it is stopped, and its
// new entry starts a process of its own; one the configuration no longer
// has is stopped.
func TestHandOverChangedEntry(t *testing.T) {
	h := newHarness(t, handOverConfig)
	eventually.True(t, "the fake ready", func() bool { return h.row("fake", "").State == StateReady })
	pid := h.row("fake", "").PID
	h.m.KeepServers()
	h.stop()
	kept := h.m.KeptServers()
	if len(kept) != 1 {
		t.Fatalf("kept %+v", kept)
	}
	m2, stop := adoptingManager(t, strings.Replace(handOverConfig, `start = "eager"`, "start = \"eager\"\nargs = [\"-tools\", \"2\"]", 1), kept)
	defer stop()
	eventually.True(t, "the changed fake ready", func() bool { return rowOf(m2, "fake").State == StateReady })
	if r := rowOf(m2, "fake"); r.PID == pid {
		t.Errorf("the changed entry was served by the old process %d", pid)
	}
	eventually.True(t, "the old process's end", func() bool { return !proctest.Alive(pid) })

	h3 := newHarness(t, handOverConfig)
	eventually.True(t, "the fake ready", func() bool { return h3.row("fake", "").State == StateReady })
	pid3 := h3.row("fake", "").PID
	h3.m.KeepServers()
	h3.stop()
	_, stop3 := adoptingManager(t, "[mcpServers.other]\ncommand = \"FAKE\"\n", h3.m.KeptServers())
	defer stop3()
	eventually.True(t, "the removed server's end", func() bool { return !proctest.Alive(pid3) })
}

// adoptingManager is a manager of toml that adopts kept, then serves;
// stop stops it and waits (more than once is fine).
func adoptingManager(t *testing.T, toml string, kept []KeptServer) (*Manager, func()) {
	t.Helper()
	m, err := New(loadConfig(t, toml), Options{StateDir: t.TempDir(), Home: t.TempDir(), Cwd: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Version: "test", ShutdownGrace: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kept {
		m.Adopt(k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = m.Serve(ctx)
	}()
	return m, func() {
		cancel()
		<-served
	}
}

func rowOf(m *Manager, name string) Status {
	for _, r := range m.Status() {
		if r.Name == name {
			return r
		}
	}
	return Status{}
}

func instanceConn(m *Manager, name string) *mcpclient.Conn {
	m.mu.Lock()
	u := m.ups[name]
	m.mu.Unlock()
	u.mu.Lock()
	in := u.instances[""].in
	u.mu.Unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.conn
}

// Servers start kept (no parent-death signal) only where their groups are
// recorded for the next daemon to end after a crash: a daemon's; not
// `snodod stdio`'s (NoRecord), whose children die with it.
func TestKeptOnlyWhenRecorded(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		kept bool
	}{
		{"daemon", Options{StateDir: t.TempDir()}, true},
		{"stdio", Options{StateDir: t.TempDir(), NoRecord: true}, false},
		{"no state directory", Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = slog.New(slog.DiscardHandler)
			m, err := New(loadConfig(t, handOverConfig), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.ups["fake"].instances[""].in.cmd.Kept; got != tc.kept {
				t.Errorf("Kept = %v, want %v", got, tc.kept)
			}
		})
	}
}
