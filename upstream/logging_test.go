package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// An upstream's notifications/message (docs/upstreams.md §5) is attributed
// like its requests: delivered to the one session with requests in
// flight on the instance when that session's level admits it (legacy: its
// logging/setLevel, info until it sets one; 2026: the request's
// logLevel), else written to the daemon's log only.

// logNow has the fake send a log message during a call, with data a
// token unique to the test case, and returns the call's params.
func logNow(level, token string) string {
	return fakeTool("fake__notify", fmt.Sprintf(`{"method":"notifications/message","params":{"level":%q,"logger":"fake","data":%q}}`, level, token))
}

// gotLog reports whether c received the log message carrying token.
func gotLog(c *client, token string) bool {
	for _, n := range c.notifications("notifications/message") {
		var p struct {
			Level, Logger string
			Data          json.RawMessage
		}
		_ = json.Unmarshal(n["params"], &p)
		if string(p.Data) == `"`+token+`"` {
			return p.Logger == "fake"
		}
	}
	return false
}

func TestLogMessagesLegacy(t *testing.T) {
	h := newHarness(t, oneFake)
	a := h.connect("", "", "2025-11-25")
	b := h.connect("", "", "2025-11-25")
	a.call("tools/list", "")
	check := func(c *client, token string, delivered bool) {
		t.Helper()
		// Anything delivered is written before the call's answer.
		if got := gotLog(c, token); got != delivered {
			t.Errorf("%s: delivered %v, want %v", token, got, delivered)
		}
		if inLog := strings.Contains(h.logs.String(), token); inLog == delivered {
			t.Errorf("%s: in the daemon log %v, want %v", token, inLog, !delivered)
		}
	}

	a.call("tools/call", logNow("info", "info-at-default"))
	check(a, "info-at-default", true)
	a.call("tools/call", logNow("debug", "debug-at-default"))
	check(a, "debug-at-default", false)

	result(t, a.call("logging/setLevel", `{"level":"error"}`))
	a.call("tools/call", logNow("warning", "warning-at-error"))
	check(a, "warning-at-error", false)
	a.call("tools/call", logNow("critical", "critical-at-error"))
	check(a, "critical-at-error", true)

	// b has a call in flight too: the message belongs to neither.
	b.start(`"slow"`, "tools/call", fakeTool("fake__slow", `{"ms":60000,"announce":true}`))
	eventually.True(t, "b's call in flight", func() bool { return h.row("fake", "").InFlight == 1 })
	a.call("tools/call", logNow("emergency", "two-sessions"))
	check(a, "two-sessions", false)
	if gotLog(b, "two-sessions") {
		t.Error("the session that did not ask got the message")
	}
	b.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`)
}

func TestLogMessagesModern(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "")
	withLevel := func(level, members string) string {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		if level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
		}
		return "{" + meta + "}," + members + "}"
	}
	for _, tc := range []struct {
		request, message, token string
		delivered               bool
	}{
		{"warning", "warning", "modern-warning", true},
		{"warning", "info", "modern-info", false},
		{"", "emergency", "modern-no-level", false}, // no logLevel: no messages (docs/protocol.md §11)
	} {
		params := logNow(tc.message, tc.token)
		res := c.call("tools/call", withLevel(tc.request, params[1:len(params)-1]))
		if isError(t, res) {
			t.Fatalf("%s: %s", tc.token, res["result"])
		}
		if got := gotLog(c, tc.token); got != tc.delivered {
			t.Errorf("%s: delivered %v, want %v", tc.token, got, tc.delivered)
		}
		if inLog := strings.Contains(h.logs.String(), tc.token); inLog == tc.delivered {
			t.Errorf("%s: in the daemon log %v, want %v", tc.token, inLog, !tc.delivered)
		}
	}
}
