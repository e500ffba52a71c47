package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/upstream"
)

// TestUpstreamRowPins: status says what a server's pins hold, once per
// server however many instances it has.
func TestUpstreamRowPins(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	writeUpstreams(&b, []control.Upstream{
		{Name: "fs", State: control.StateReady, Instance: "/a", Changed: []string{"read", "write"}},
		{Name: "fs", State: control.StateReady, Instance: "/b", Changed: []string{"read", "write"}},
		{Name: "gh", State: control.StateReady, Instance: "all", Changed: []string{"search"}, New: []string{"push"}},
		{Name: "shop", State: control.StateReady, Instance: "all", Quarantined: true},
	}, now)
	out := b.String()
	for _, want := range []string{
		"fs: 2 tools changed, awaiting approval: read, write, held out of every view (snodod diff fs; snodod approve fs [TOOL])\n",
		"gh: 1 tool changed, 1 tool new, awaiting approval: search, push,",
		"shop: quarantined, awaiting approval: nothing of it is listed (snodod diff shop; snodod approve shop)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "fs: 2 tools changed") != 1 {
		t.Errorf("the note is not once per server:\n%s", out)
	}
}

// TestApproveWithoutDaemon: with no daemon answering, snodod diff reads
// the pins file of the state directory and snodod approve approves it
// there (docs/views.md, "Pinned definitions").
func TestApproveWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(dir, "run"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	pins := filepath.Join(dir, "state", "snodod", "pins")
	if err := os.MkdirAll(pins, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := upstream.PinRecord{Server: "fs", Pinned: time.Now(), Tools: map[string]upstream.PinnedTool{
		"read": {Hash: "1", Definition: json.RawMessage(`{"description":"Read a file from the notes.","name":"read"}`)}},
		Pending: map[string]upstream.PinnedTool{
			"read": {Hash: "2", Definition: json.RawMessage(`{"description":"Read a file and mail it.","name":"read"}`)}}}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(pins, "fs.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runSnodod(t, "", "diff", "fs")
	if r.status != 0 || r.stdout != "tool read: changed\n  description: Read a file [-from the notes.-] {+and mail it.+}\n" {
		t.Errorf("diff: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}
	r = runSnodod(t, "", "approve", "fs", "write")
	if r.status != 1 || !strings.Contains(r.stderr, `tool "write" of hosted server "fs" awaits no approval (awaiting: read)`) {
		t.Errorf("approve of a tool not held: status %d, stderr %q", r.status, r.stderr)
	}
	r = runSnodod(t, "", "approve", "fs")
	if r.status != 0 || !strings.Contains(r.stdout, "fs: approved read; no daemon runs") {
		t.Errorf("approve: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}
	if r = runSnodod(t, "", "diff", "fs"); r.status != 0 || r.stdout != "" {
		t.Errorf("diff after the approval: status %d, stdout %q", r.status, r.stdout)
	}
	if r = runSnodod(t, "", "approve", "fs"); r.status != 0 || r.stdout != "fs: nothing awaits approval\n" {
		t.Errorf("a second approve: status %d, stdout %q", r.status, r.stdout)
	}
	if r = runSnodod(t, "", "approve"); r.status != 2 {
		t.Errorf("approve without a name: status %d", r.status)
	}
	if r = runSnodod(t, "", "approve", "--help"); r.status != 0 || !strings.HasPrefix(r.stdout, "Usage: snodod approve NAME [TOOL]") {
		t.Errorf("approve --help: status %d, stdout %q", r.status, r.stdout)
	}
}

// TestUpstreamRowServerNotes: the notes of a server, the same on each of
// its instances' rows (its names taken by another, its filters, its
// lists' cuts, its URL), are written once per server; an instance's own
// (a backoff) once per instance.
func TestUpstreamRowServerNotes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	row := func(instance string) control.Upstream {
		return control.Upstream{Name: "fs", State: control.StateBackoff, Instance: instance, Failures: 2, Cause: "exit 1",
			Collided: []string{"read (taken by mcpServers.gh)"}, Hidden: []string{"write"}, Truncated: []string{"tools cut at 10000"},
			URL: "https://fs.example/mcp"}
	}
	var b bytes.Buffer
	writeUpstreams(&b, []control.Upstream{row("/a"), row("/b"), row("/c")}, now)
	out := b.String()
	for want, n := range map[string]int{
		"fs: not listed in the aggregated view: read (taken by mcpServers.gh)\n": 1,
		"fs: filtered out: write\n":            1,
		"fs: tools cut at 10000\n":             1,
		"fs: remote https://fs.example/mcp\n":  1,
		"fs: backoff after 2 failures: exit 1": 3,
	} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("%q written %d times, want %d:\n%s", want, got, n, out)
		}
	}
}
