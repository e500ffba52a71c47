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
