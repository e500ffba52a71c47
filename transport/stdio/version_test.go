package stdio_test

import (
	"encoding/json"
	"testing"
)

// headerVersion is the Mcp-Protocol-Version header the test catalog saw,
// and whether it judged the request 2026-era.
func headerVersion(t *testing.T, line string) (string, bool) {
	t.Helper()
	var r struct {
		HeaderVersion string `json:"headerVersion"`
		Modern        bool   `json:"modern"`
	}
	mustUnmarshal(t, parse(t, line).Result, &r)
	return r.HeaderVersion, r.Modern
}

func initVersion(t *testing.T, line string) string {
	t.Helper()
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	mustUnmarshal(t, parse(t, line).Result, &r)
	return r.ProtocolVersion
}

// Case 64: initialize is answered inline, so a pipelined request already
// carries the negotiated version.
func TestInitializePipelined(t *testing.T) {
	h := start(t, pipes)
	h.write(initReq("2025-11-25") + "\n" + lreq(2, "tools/list", map[string]any{}) + "\n")
	if v := initVersion(t, h.line()); v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	if v, _ := headerVersion(t, h.line()); v != "2025-11-25" {
		t.Fatalf("header %q", v)
	}
	h.finish()
}

// Cases 65 and 66: a failed initialize leaves the recorded version; a later
// successful one replaces it.
func TestRenegotiation(t *testing.T) {
	h := start(t, pipes)
	h.send(initReq("2024-11-05"))
	if v := initVersion(t, h.line()); v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	h.send(initReq("2025-06-18"))
	if v := initVersion(t, h.line()); v != "2025-06-18" {
		t.Fatalf("negotiated %s", v)
	}
	h.send(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}`)
	h.expect(errLine("9", -32602, "initialize requires protocolVersion, capabilities and clientInfo name/version"))
	h.send(lreq(10, "tools/list", map[string]any{}))
	if v, _ := headerVersion(t, h.line()); v != "2025-06-18" {
		t.Fatalf("header %q after a failed initialize", v)
	}
	h.finish()
}

// Case 67 at the transport level: a 2026-era request after a legacy
// initialize is dispatched without the header.
func TestModernRequestHasNoHeader(t *testing.T) {
	h := start(t, pipes)
	h.send(initReq("2025-11-25"))
	h.line()
	h.send(req(5, "tools/list", `{}`))
	if v, modern := headerVersion(t, h.line()); v != "" || !modern {
		t.Fatalf("header %q modern %v", v, modern)
	}
	// initialize carrying the 2026 key is an ordinary 2026 request.
	h.send(req(6, "initialize", `{}`))
	if f := parse(t, h.line()); f.Error == nil || f.Error.Code != -32601 {
		t.Fatalf("got %+v", f)
	}
	h.finish()
}

// Case 68: a legacy request before any initialize carries no header.
func TestLegacyBeforeInitialize(t *testing.T) {
	h := start(t, pipes)
	h.send(lreq(1, "tools/list", map[string]any{}))
	h.expect(errLine("1", -32600, "No configured protocol dialect recognized the request. Send initialize first (or use 2026-07-28 _meta)"))
	h.send(lreq(2, "ping", json.RawMessage(`{}`)))
	h.expect(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	h.finish()
}
