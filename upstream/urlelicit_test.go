package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// A legacy upstream's -32042 (URL elicitation required, 2025-11-25):
// input_required for a 2026 client, whose retry re-sends the call; the
// error as it is for a legacy client (docs/upstreams.md §6).

const urlFake = `
[mcpServers.fake]
command = "FAKE"
args = ["-url-elicitation"]
`

// modernWith is modern with the client capabilities caps.
func modernWith(caps, members string) string {
	return `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `},` + members + `}`
}

func TestURLElicitationModernClient(t *testing.T) {
	h := newHarness(t, urlFake)
	c := h.connect("", "", "")
	caps := `{"elicitation":{"form":{},"url":{}}}`
	first := c.call("tools/call", modernWith(caps, `"name":"fake__elicit","arguments":{"x":1}`))
	reqs, state := inputRequiredOf(t, first)
	var ask struct {
		Method string `json:"method"`
		Params struct {
			Mode, URL, ElicitationID, Message string
		} `json:"params"`
	}
	if err := json.Unmarshal(reqs["url1"], &ask); err != nil || len(reqs) != 1 || state == "" {
		t.Fatalf("input_required %s", first["result"])
	}
	if ask.Method != "elicitation/create" || ask.Params.Mode != "url" || ask.Params.ElicitationID != "fake-url-1" ||
		ask.Params.URL != "https://fake.test/authorize?id=fake-url-1" || ask.Params.Message != "Sign in to fake to go on." {
		t.Errorf("url1 = %s", reqs["url1"])
	}
	retry := c.call("tools/call", modernWith(caps, `"name":"fake__elicit","arguments":{"x":1},"inputResponses":{"url1":{"action":"accept"}},"requestState":"`+state+`"`))
	if got := structured(t, retry); string(got["authorized"]) != "true" || string(got["calls"]) != "2" {
		t.Errorf("the retry did not re-send the call: %s", retry["result"])
	}
	// The state is bound to the call: another call's retry is refused.
	other := c.call("tools/call", modernWith(caps, `"name":"fake__elicit","arguments":{"x":2},"inputResponses":{"url1":{"action":"accept"}},"requestState":"`+state+`"`))
	if code, _, _ := errorOf(t, other); code != protocol.CodeInvalidParams {
		t.Errorf("state of another call: %v", other)
	}
}

// A 2026 client that did not declare URL elicitation cannot be asked:
// -32021 naming the capability.
func TestURLElicitationUndeclared(t *testing.T) {
	h := newHarness(t, urlFake)
	c := h.connect("", "", "")
	res := c.call("tools/call", modernWith(`{"elicitation":{}}`, `"name":"fake__elicit","arguments":{}`))
	code, _, data := errorOf(t, res)
	if code != protocol.CodeMissingCapability || !strings.Contains(string(data), `"requiredCapabilities":{"elicitation":{"url":{}}}`) {
		t.Errorf("%d %s", code, data)
	}
}

func TestURLElicitationLegacyClient(t *testing.T) {
	h := newHarness(t, urlFake)
	c := h.connect("", "", "2025-11-25")
	code, msg, data := errorOf(t, c.call("tools/call", fakeTool("fake__elicit", "")))
	if code != CodeURLElicitationRequired || msg != "This request requires more information." ||
		!strings.Contains(string(data), `"url":"https://fake.test/authorize?id=fake-url-1"`) {
		t.Errorf("%d %q %s", code, msg, data)
	}
	if got := structured(t, c.call("tools/call", fakeTool("fake__elicit", ""))); string(got["authorized"]) != "true" {
		t.Errorf("the client's own retry: %v", got)
	}
}
