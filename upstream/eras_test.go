package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
)

const modernFake = `
[mcpServers.fake]
command = "FAKE"
args = ["-era", "2026"]
`

// inputRequiredOf decodes an input_required result.
func inputRequiredOf(t *testing.T, res map[string]json.RawMessage) (requests map[string]json.RawMessage, state string) {
	t.Helper()
	r := result(t, res)
	if string(r["resultType"]) != `"input_required"` {
		t.Fatalf("not input_required: %s", res["result"])
	}
	_ = json.Unmarshal(r["inputRequests"], &requests)
	_ = json.Unmarshal(r["requestState"], &state)
	return requests, state
}

// TestErasModernModern: input_required passes through, requestState in
// snodod's envelope; the retry reaches the upstream with its own state.
func TestErasModernModern(t *testing.T) {
	h := newHarness(t, modernFake)
	c := h.connect("", "", "")
	first := c.call("tools/call", modern(`"name":"fake__elicit","arguments":{}`))
	reqs, state := inputRequiredOf(t, first)
	if _, ok := reqs["u1"]; !ok || state == "" || strings.Contains(state, "fake-state") {
		t.Fatalf("input_required %s", first["result"])
	}
	retry := c.call("tools/call", modern(`"name":"fake__elicit","arguments":{},"inputResponses":{"u1":{"action":"decline"}},"requestState":"`+state+`"`))
	if got := string(structured(t, retry)["response"]); !strings.Contains(got, "decline") {
		t.Errorf("retry: %s", retry["result"])
	}
	if r := result(t, retry); string(r["resultType"]) != `"complete"` || !strings.Contains(string(r["_meta"]), `"snodod"`) {
		t.Errorf("2026 shaping: %s", retry["result"])
	}
	// A state from another request, or forged, is refused.
	bad := c.call("tools/call", modern(`"name":"fake__elicit","arguments":{"x":1},"inputResponses":{"u1":{"action":"decline"}},"requestState":"`+state+`"`))
	if code, _, _ := errorOf(t, bad); code != protocol.CodeInvalidParams {
		t.Errorf("replayed state: %d", code)
	}
	if row := h.row("fake", ""); row.Era != mcpclient.Era2026 {
		t.Errorf("era %q", row.Era)
	}
}

// TestErasLegacyClientModernUpstream: snodod answers initialize; the
// upstream's input_required becomes a request to the client, then a retry.
func TestErasLegacyClientModernUpstream(t *testing.T) {
	h := newHarness(t, modernFake)
	c := h.connect("", "", "2025-11-25")
	c.onRequest(func(method string, params json.RawMessage) (any, *protocol.Error) {
		return map[string]any{"action": "accept", "content": map[string]any{"v": "yes"}}, nil
	})
	res := c.call("tools/call", fakeTool("fake__elicit", ""))
	if got := string(structured(t, res)["response"]); !strings.Contains(got, `"yes"`) {
		t.Errorf("result %s", res["result"])
	}
	if r := result(t, res); r["resultType"] != nil {
		t.Errorf("legacy client got 2026 members: %s", res["result"])
	}
}

// TestErasModernClientLegacyUpstream parks the upstream's elicitation:
// the client gets input_required, its retry's answer goes to the
// upstream, and the call's result answers the retry.
func TestErasModernClientLegacyUpstream(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "")
	first := c.call("tools/call", modern(`"name":"fake__elicit","arguments":{}`))
	reqs, state := inputRequiredOf(t, first)
	var u1 struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(reqs["u1"], &u1)
	if u1.Method != "elicitation/create" {
		t.Fatalf("input request %s", reqs["u1"])
	}
	if n := h.m.parks.parked(); n != 1 {
		t.Errorf("parked %d", n)
	}
	retry := c.call("tools/call", modern(`"name":"fake__elicit","arguments":{},"inputResponses":{"u1":{"action":"accept","content":{"v":"ok"}}},"requestState":"`+state+`"`))
	if got := string(structured(t, retry)["response"]); !strings.Contains(got, `"ok"`) {
		t.Errorf("retry %s", retry["result"])
	}
	if n := h.m.parks.parked(); n != 0 {
		t.Errorf("still parked %d", n)
	}
	// The handle is spent.
	again := c.call("tools/call", modern(`"name":"fake__elicit","arguments":{},"inputResponses":{"u1":{"action":"decline"}},"requestState":"`+state+`"`))
	if code, msg, _ := errorOf(t, again); code != protocol.CodeInvalidParams || !strings.Contains(msg, "expired or was answered") {
		t.Errorf("spent handle: %d %s", code, msg)
	}
}

// TestErasModernClientShaping: a 2026 client gets resultType, ttlMs and
// snodod's serverInfo on relayed results.
func TestErasModernClientShaping(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "")
	res := c.call("tools/call", modern(`"name":"fake__echo","arguments":{}`))
	r := result(t, res)
	if string(r["resultType"]) != `"complete"` || !strings.Contains(string(r["_meta"]), "io.modelcontextprotocol/serverInfo") {
		t.Errorf("2026 result %s", res["result"])
	}
	list := result(t, c.call("tools/list", modern("")))
	if list["ttlMs"] == nil || string(list["resultType"]) != `"complete"` {
		t.Errorf("2026 list %v", list)
	}
}
