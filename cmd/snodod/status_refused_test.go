package main

import (
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
)

// status shows the refusals by reason, on the sockets and on HTTP, and
// says nothing of them when there were none.
func TestStatusRefusals(t *testing.T) {
	st := &control.Status{Version: "v", Started: time.Now(), Refused: map[string]int64{"uid_capacity": 2, "uid": 1},
		HTTP: &control.HTTP{State: "serving", Listen: "127.0.0.1:8080", Path: "/mcp", Access: "loopback",
			MaxSessions: 1024, MaxSessionsPerPeer: 256, Refused: map[string]uint64{"peer": 3, "host": 1}}}
	var b strings.Builder
	writeStatus(&b, st, time.Now())
	for _, want := range []string{
		"refused on the sockets: uid 1, uid capacity 2\n",
		"http: serving on 127.0.0.1:8080/mcp (loopback), 0 sessions (max 1024, 256 per client), 0 streams (0 listens), requests 0 2026 + 0 legacy, refused: host 1, peer 3, 0 restarts\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status:\n%s\nwant a line %q", b.String(), want)
		}
	}
	b.Reset()
	st.Refused, st.HTTP.Refused = nil, nil
	writeStatus(&b, st, time.Now())
	if strings.Contains(b.String(), "refused") {
		t.Errorf("refusals shown without any:\n%s", b.String())
	}
}
