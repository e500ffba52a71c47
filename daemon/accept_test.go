package daemon

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// The clients of one uid hold at most
// daemon.max_sessions_per_uid sessions, at the exact boundary: the next
// one is refused with one line (which `snodod connect` recognizes), its
// refusal is counted by reason, the sessions already open go on, and a
// session's end frees its place.
func TestMaxSessionsPerUID(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.max_sessions_per_uid": 2}), Options{})
	a, b := dialSession(t, r.cfg.Daemon.Socket), dialSession(t, r.cfg.Daemon.Socket)
	a.initialize()
	b.initialize()
	extra := dialSession(t, r.cfg.Daemon.Socket)
	line := extra.line()
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Server session capacity exhausted (daemon.max_sessions_per_uid = 2, held by uid ` + strconv.Itoa(r.d.uid) + `)"}}`
	if line != want {
		t.Errorf("a third session of one uid: %s\nwant %s", line, want)
	}
	extra.eof()
	if msg, ok := RefusalMessage([]byte(line)); !ok || !strings.HasPrefix(msg, "Server session capacity exhausted") {
		t.Errorf("RefusalMessage(%s) = %q, %v", line, msg, ok)
	}
	if got := a.call(2, "echo", `{"text":"still here"}`); !strings.Contains(got, "still here") {
		t.Errorf("an open session after the refusal: %s", got)
	}
	if got := r.d.Status().Refused["uid_capacity"]; got != 1 {
		t.Errorf("status refused uid_capacity = %d, want 1 (%v)", got, r.d.Status().Refused)
	}
	b.c.Close()
	eventually.True(t, "the session to end", func() bool { return len(r.d.Status().Sessions) == 1 })
	dialSession(t, r.cfg.Daemon.Socket).initialize()
}

// A session that sends no request within
// daemon.initialize_timeout is ended (a connection holding half a line
// too), counted in status; one that sent a request is kept past it.
func TestInitializeTimeout(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.initialize_timeout": 300 * time.Millisecond}), Options{})
	used := dialSession(t, r.cfg.Daemon.Socket)
	used.initialize()
	idle, half := dialSession(t, r.cfg.Daemon.Socket), dialSession(t, r.cfg.Daemon.Socket)
	if _, err := half.c.Write([]byte(`{"jsonrpc":"2.0","id":1,"met`)); err != nil {
		t.Fatal(err)
	}
	idle.eof()
	half.eof()
	if got := r.d.Status().Refused["initialize_timeout"]; got != 2 {
		t.Errorf("status refused initialize_timeout = %d, want 2", got)
	}
	// Well past the timeout, the session that sent a request is served.
	if got := used.call(2, "echo", `{"text":"kept"}`); !strings.Contains(got, "kept") {
		t.Errorf("the used session: %s", got)
	}
}
