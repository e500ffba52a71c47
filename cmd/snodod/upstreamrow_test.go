package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
)

// TestUpstreamRowStarting: an instance still starting (a server whose
// handshake never ends) shows its process and how long it has been
// starting, not "PID -".
func TestUpstreamRowStarting(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	writeUpstreams(&b, []control.Upstream{{Name: "hang", State: control.StateStarting, Instance: "all", PID: 4242,
		StartingSince: now.Add(-78 * time.Second)}}, now)
	out := b.String()
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[2], "starting") || !strings.Contains(lines[2], "4242") {
		t.Errorf("the row lacks the state or the pid:\n%s", out)
	}
	if !strings.Contains(out, "hang: starting for 1m18s; lists answer without it until it is ready") {
		t.Errorf("no starting line:\n%s", out)
	}
}

// TestUpstreamRowSandbox: a row shows its tree's CPU time and memory and
// its sandbox level, marked when something is not enforced, which the
// line below the table names.
func TestUpstreamRowSandbox(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	writeUpstreams(&b, []control.Upstream{
		{Name: "fs", State: control.StateReady, Instance: "all", PID: 4242, Since: now, CPUMs: 1234, RSSBytes: 45 << 20, Sandbox: "standard",
			Unenforced: []string{"no landlock tcp (Landlock ABI 3 < 4 has no TCP rules)"}},
		{Name: "plain", State: control.StateReady, Instance: "all", PID: 4243, Since: now, Sandbox: "off"},
	}, now)
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[1], "CPU") || !strings.Contains(lines[1], "SANDBOX") {
		t.Errorf("header: %q", lines[1])
	}
	for _, want := range []string{"1.23s", "45.0M", "standard!"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("fs row lacks %q: %q", want, lines[2])
		}
	}
	if !strings.Contains(lines[3], " off ") {
		t.Errorf("plain row: %q", lines[3])
	}
	if !strings.Contains(out, "fs: sandbox standard, not enforced on this kernel: no landlock tcp (Landlock ABI 3 < 4 has no TCP rules)\n") {
		t.Errorf("no line for what is not enforced:\n%s", out)
	}
}
