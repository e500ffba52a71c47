package main

import (
	"strings"
	"testing"
)

// TestConnectViewFlagErrors: --view excludes a server name and --relay,
// each said in one line, exit status 2, before any daemon is looked for.
func TestConnectViewFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--view", "ro", "gh"}, "snodod connect: --view ro and the server name gh exclude each other; choose one\n"},
		{[]string{"--relay", "--view", "ro"}, "snodod connect: --relay serves the aggregated view only; drop --relay to open view ro\n"},
	} {
		dir := sockDir(t)
		r := runIn(t, isolated(dir), "", append([]string{"connect"}, tt.args...)...)
		if r.status != 2 || r.stdout != "" || r.stderr != tt.want {
			t.Errorf("connect %v: status %d stdout %q stderr %q, want 2 and %q", tt.args, r.status, r.stdout, r.stderr, tt.want)
		}
	}
	r := runIn(t, isolated(sockDir(t)), "", "connect", "--help")
	if !strings.Contains(r.stdout+r.stderr, "-view NAME") {
		t.Errorf("connect --help does not tell of --view:\n%s%s", r.stdout, r.stderr)
	}
}

// TestViewsWithoutDaemon: snodod views says where it looked, exit 1.
func TestViewsWithoutDaemon(t *testing.T) {
	dir := sockDir(t)
	r := runIn(t, isolated(dir), "", "views", "--socket", dir+"/s.sock", "--control-socket", dir+"/c.sock")
	if r.status != 1 || !strings.Contains(r.stderr, "snodod views: ") || !strings.Contains(r.stderr, "is snodod serve running?") {
		t.Errorf("status %d stderr %q", r.status, r.stderr)
	}
}
