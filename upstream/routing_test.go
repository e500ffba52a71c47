package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
)

// fakeHistoryOf returns what the upstream saw, through a session.
func fakeHistoryOf(t *testing.T, c *client, tool string) history {
	t.Helper()
	var h history
	if err := json.Unmarshal(result(t, c.call("tools/call", fakeTool(tool, "")))["structuredContent"], &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSameIDFromTwoSessions is the normal case of a shared upstream: two
// sessions send "id":1 at once; each gets its own answer (docs/upstreams.md §5).
func TestSameIDFromTwoSessions(t *testing.T) {
	h := newHarness(t, oneFake)
	a, b := h.connect("", "", "2025-11-25"), h.connect("", "", "2025-11-25")
	a.call("tools/list", "")
	for round := range 5 {
		ra := a.start("1", "tools/call", fakeTool("fake__slow", fmt.Sprintf(`{"ms":20,"who":"a%d"}`, round)))
		rb := b.start("1", "tools/call", fakeTool("fake__slow", fmt.Sprintf(`{"ms":20,"who":"b%d"}`, round)))
		for who, ch := range map[string]chan map[string]json.RawMessage{"a": ra, "b": rb} {
			res := a.wait(ch)
			if got := string(structured(t, res)["arguments"]); !strings.Contains(got, fmt.Sprintf(`"%s%d"`, who, round)) {
				t.Errorf("session %s got %s", who, got)
			}
		}
	}
	// The upstream saw distinct ids, never the clients'.
	seen := map[string]bool{}
	for _, r := range fakeHistoryOf(t, a, "fake__history").Requests {
		if seen[string(r.ID)] {
			t.Errorf("upstream id %s reused", r.ID)
		}
		seen[string(r.ID)] = true
	}
}

// TestProgressRouting: colliding client tokens, each session gets its own
// progress with its own token, and nothing after the response.
func TestProgressRouting(t *testing.T) {
	h := newHarness(t, oneFake)
	a, b := h.connect("", "", "2025-11-25"), h.connect("", "", "2025-11-25")
	params := fakeTool("fake__progress", `{"steps":3,"ms":5}`)
	params = strings.Replace(params, `{"name"`, `{"_meta":{"progressToken":"tok"},"name"`, 1)
	var wg sync.WaitGroup
	for _, c := range []*client{a, b} {
		wg.Go(func() { _ = result(t, c.call("tools/call", params)) })
	}
	wg.Wait()
	for name, c := range map[string]*client{"a": a, "b": b} {
		notes := c.notifications("notifications/progress")
		var last float64 = -1
		steps := 0
		for _, n := range notes {
			var p struct {
				Token    string  `json:"progressToken"`
				Progress float64 `json:"progress"`
				Message  string  `json:"message"`
			}
			_ = json.Unmarshal(n["params"], &p)
			if p.Token != "tok" || p.Progress <= last {
				t.Errorf("%s: progress %s", name, n["params"])
			}
			last = p.Progress
			if strings.HasPrefix(p.Message, "step ") {
				steps++
			}
		}
		if steps == 0 || steps > 3 {
			t.Errorf("%s got %d upstream progress reports (of 3): %v", name, steps, notes)
		}
	}
}

// TestCancelTranslated: a client's cancel reaches the upstream as its own
// id; the slot frees and the late answer is dropped.
func TestCancelTranslated(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "2025-11-25")
	c.call("tools/list", "")
	ch := c.start(`"c1"`, "tools/call", fakeTool("fake__slow", `{"ms":60000,"announce":true}`))
	eventually.True(t, "the call in flight", func() bool { return h.row("fake", "").InFlight == 1 })
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"changed my mind"}}`)
	eventually.True(t, "the slot freed", func() bool { return h.row("fake", "").InFlight == 0 })
	// The slot frees when the cancel is processed here; the upstream's
	// notification may still be on its way.
	var hist history
	eventually.True(t, "the upstream told", func() bool {
		hist = fakeHistoryOf(t, c, "fake__history")
		return len(hist.Cancelled) > 0
	})
	if len(hist.Cancelled) != 1 || string(hist.Cancelled[0].RequestID) == `"c1"` {
		t.Errorf("upstream cancels %+v, want one naming its own id", hist.Cancelled)
	}
	select {
	case res := <-ch:
		t.Errorf("a cancelled request was answered: %v", res)
	default:
	}
}

// TestClosingSessionCancels: a session whose client goes away (its
// output fails) cancels its requests on the upstream.
func TestClosingSessionCancels(t *testing.T) {
	h := newHarness(t, oneFake)
	a := h.connect("", "", "2025-11-25")
	b := h.connect("", "", "2025-11-25")
	params := strings.Replace(fakeTool("fake__progress", `{"steps":100000,"ms":20}`), `{"name"`, `{"_meta":{"progressToken":1},"name"`, 1)
	a.start("1", "tools/call", params)
	eventually.True(t, "the call in flight", func() bool { return h.row("fake", "").InFlight == 1 })
	a.gone()
	eventually.True(t, "the upstream told", func() bool { return len(fakeHistoryOf(t, b, "fake__history").Cancelled) == 1 })
}

// TestRelayedCrashMidCall: answered at once, not replayed; the next call runs on
// the restarted instance.
func TestRelayedCrashMidCall(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "2025-11-25")
	res := c.call("tools/call", fakeTool("fake__crash", `{"code":3,"stderr":"boom"}`))
	if !isError(t, res) || !strings.Contains(text(t, res), `snodod: upstream "fake" exited (status 3) while this call was running; it may have partly run`) {
		t.Errorf("crash: %s", res["result"])
	}
	var meta struct {
		Detail Detail `json:"dev.snodod/upstream"`
	}
	_ = json.Unmarshal(result(t, res)["_meta"], &meta)
	if meta.Detail.Name != "fake" || !strings.Contains(meta.Detail.StderrTail, "boom") {
		t.Errorf("detail %+v", meta.Detail)
	}
	// The answer can come before the supervisor has seen the exit: until
	// then the row still says ready, with no restart.
	eventually.True(t, "restarted", func() bool {
		row := h.row("fake", "")
		return row.State == StateReady && row.Restarts == 1
	})
	if res := c.call("tools/call", fakeTool("fake__echo", "")); isError(t, res) {
		t.Errorf("after restart: %s", res["result"])
	}
	if row := h.row("fake", ""); row.Restarts != 1 {
		t.Errorf("restarts %d", row.Restarts)
	}
	// The crash was not replayed: the new process saw one tools/call so far
	// besides this history.
	for _, r := range fakeHistoryOf(t, c, "fake__history").Requests {
		if r.Tool == "crash" {
			t.Error("the crashing call was replayed")
		}
	}
}

// TestBackoffFailedOnDemand: a server that cannot start goes backoff, then
// failed; a later request gets the precise error, and triggers at most one
// attempt per max_delay.
func TestBackoffFailedOnDemand(t *testing.T) {
	h := newHarness(t, `
[mcpServers.broken]
command = "FAKE"
args = ["-exit-at-start", "1", "-exit-stderr", "fatal: no token"]
restart = { max_attempts = 2, initial_delay = "10ms", max_delay = "1h" }
`)
	c := h.connect("", "", "2025-11-25")
	c.call("tools/list", "") // a list with no cache starts it; its failure is not the list's
	res := c.call("tools/call", fakeTool("broken__echo", ""))
	code, msg, _ := errorOf(t, res) // not listed: unknown to the view
	if code != protocol.CodeInvalidParams || msg != "Unknown tool: broken__echo" {
		t.Logf("call of a never-listed tool: %d %s", code, msg)
	}
	eventually.True(t, "failed", func() bool { return h.row("broken", "").State == StateFailed })
	row := h.row("broken", "")
	if row.Failures != 2 || !strings.Contains(row.Cause, "exited with status 1") {
		t.Errorf("row %+v", row)
	}
	p := h.connect("broken", "", "2025-11-25")
	res = p.call("prompts/list", "")
	code, msg, data := errorOf(t, res)
	if code != CodeUnavailable || !strings.HasPrefix(msg, `snodod: upstream "broken" is unavailable: `) ||
		!strings.Contains(msg, "Last stderr: fatal: no token") || !strings.Contains(msg, "no automatic restart") {
		t.Errorf("error %d %s", code, msg)
	}
	var d Detail
	if json.Unmarshal(data, &d) != nil || d.State != "failed" || d.Attempts != 2 {
		t.Errorf("data %s", data)
	}
	// The on-demand attempt was spent just now (max_delay 1h): no more.
	if row := h.row("broken", ""); row.Failures != 2 {
		t.Errorf("an attempt ran within max_delay: %+v", row)
	}
}
