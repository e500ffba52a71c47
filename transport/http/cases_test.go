package http_test

import (
	"context"
	"encoding/json"
	nethttp "net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// The cases of docs/protocol.md §14.6, over a real loopback listener.

const discover = `{"jsonrpc":"2.0","id":"d1","method":"server/discover","params":{"_meta":` + META + `}}`

// Case 48: Origin, Host, body size, Content-Type, decoding.
func TestCase48Refusals(t *testing.T) {
	e := newEnv(t, nil)
	h := modernHeaders("server/discover", "")
	with := func(kv ...string) nethttp.Header {
		c := h.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			c.Set(kv[i], kv[i+1])
		}
		return c
	}
	pre, suf := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":`+META+`,"pad":"`, `"}}`
	big := pre + strings.Repeat("x", 2_000_001-len(pre)-len(suf)) + suf
	if len(big) != 2_000_001 {
		t.Fatalf("body is %d bytes", len(big))
	}
	cases := []struct {
		name   string
		h      nethttp.Header
		body   string
		status int
		code   int
		msg    string
	}{
		{"evil origin", with("Origin", "http://evil.example"), discover, 403, -32600, "Origin not allowed"},
		{"evil origin and host", with("Origin", "http://evil.example", "Host", "evil.example"), discover, 403, -32600, hostRefused("evil.example")},
		{"evil host", with("Host", "evil.example:8080"), discover, 403, -32600, hostRefused("evil.example:8080")},
		{"localhost origin", with("Origin", "http://localhost:5173"), discover, 200, 0, ""},
		{"loopback v6 origin", with("Origin", "https://[::1]:9"), discover, 200, 0, ""},
		{"no origin", h, discover, 200, 0, ""},
		{"2,000,001 bytes", h, big, 413, -32600, "Message exceeds the 2000000-byte body limit"},
		{"text/plain", with("Content-Type", "text/plain"), discover, 415, -32600, "Content-Type must be application/json"},
		{"charset", with("Content-Type", "application/json; charset=utf-8"), discover, 200, 0, ""},
		{"not json", h, `{not-json}`, 400, -32700, "Parse error"},
		{"empty", h, ``, 400, -32700, "Parse error"},
		{"batch", h, `[]`, 400, -32600, "Invalid Request"},
		{"params not an object", h, `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}`, 400, -32602, "Request params must be an object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, e.url, c.h, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.code == 0 {
				if !contains(r.body, `"resultType":"complete"`, `"supportedVersions"`) {
					t.Fatalf("not a discover result: %s", r.body)
				}
				return
			}
			if code, msg := r.errorCode(t); code != c.code || msg != c.msg {
				t.Fatalf("error %d %q, want %d %q", code, msg, c.code, c.msg)
			}
		})
	}
}

// hostRefused is the 403's message for host.
func hostRefused(host string) string {
	return `Host not allowed: "` + host + `" is not a loopback name, the listener's own address, or listed in http.allowed_hosts`
}

// The body limit at its exact boundary, with a configured limit.
func TestBodyLimitBoundary(t *testing.T) {
	body := discover
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.MaxBodyBytes = len(body) })
	if r := post(t, e.url, modernHeaders("server/discover", ""), body); r.status != 200 {
		t.Fatalf("a body of exactly the limit: %d %s", r.status, r.body)
	}
	r := post(t, e.url, modernHeaders("server/discover", ""), body+" ")
	if code, msg := r.errorCode(t); r.status != 413 || code != -32600 || !strings.Contains(msg, "-byte body limit") {
		t.Fatalf("one byte over: %d %s", r.status, r.body)
	}
}

// Case 49.
func TestCase49Discover(t *testing.T) {
	e := newEnv(t, nil)
	r := post(t, e.url, modernHeaders("server/discover", ""), discover)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" ||
		!contains(r.body, `"id":"d1"`, `"supportedVersions":["2026-07-28","2025-11-25","2025-06-18"]`, `"instructions":"Use only when useful"`) {
		t.Fatalf("%d %s %s", r.status, r.header, r.body)
	}
}

// Case 50: header rules of §13.3.
func TestCase50Headers(t *testing.T) {
	e := newEnv(t, nil)
	echo := `"name":"echo","arguments":{"text":"hi"}`
	set := func(h nethttp.Header, kv ...string) nethttp.Header {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	v999 := strings.Replace(modernBody("1", "server/discover", ""), `"2026-07-28"`, `"v999.0.0"`, 1)
	cases := []struct {
		name   string
		h      nethttp.Header
		body   string
		status int
		code   int
		msg    string
	}{
		{"no _meta", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 400, -32602, "Required request _meta is missing"},
		{"_meta not an object", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":5}}`, 400, -32602, "_meta must be an object"},
		{"no version in _meta", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}}`, 400, -32602, "Missing required io.modelcontextprotocol/protocolVersion metadata"},
		{"body version v999", modernHeaders("server/discover", ""), v999, 400, -32020, "Protocol header does not match request metadata"},
		{"header and body v999", set(modernHeaders("server/discover", ""), "MCP-Protocol-Version", "v999.0.0"), v999, 400, -32022, "Unsupported protocol version"},
		{"no version header", set(modernHeaders("server/discover", ""), "MCP-Protocol-Version", ""), discover, 400, -32020, "Protocol header does not match request metadata"},
		{"no Mcp-Method", set(modernHeaders("server/discover", ""), "Mcp-Method", ""), discover, 400, -32020, "Request header does not match the request body"},
		{"Mcp-Method case", set(modernHeaders("server/discover", ""), "Mcp-Method", "SERVER/DISCOVER"), discover, 400, -32020, "Request header does not match the request body"},
		{"Mcp-Name other", modernHeaders("tools/call", "other"), modernBody("1", "tools/call", echo), 400, -32020, "Request header does not match the request body"},
		{"Mcp-Name missing", modernHeaders("tools/call", ""), modernBody("1", "tools/call", echo), 400, -32020, "Request header does not match the request body"},
		{"Mcp-Name base64", modernHeaders("tools/call", "=?base64?ZWNobw==?="), modernBody("1", "tools/call", echo), 200, 0, ""},
		{"Mcp-Name whitespace", modernHeaders("tools/call", "  echo "), modernBody("1", "tools/call", echo), 200, 0, ""},
		{"Mcp-Name bad padding", modernHeaders("tools/call", "=?base64?ZWNobw?="), modernBody("1", "tools/call", echo), 400, -32020, "Request header does not match the request body"},
		{"Mcp-Name bad alphabet", modernHeaders("tools/call", "=?base64?ZW!!Nobw==?="), modernBody("1", "tools/call", echo), 400, -32020, "Request header does not match the request body"},
		{"lowercase names", set(hdr("content-type", "application/json", "mcp-protocol-version", "2026-07-28", "mcp-method", "server/discover")), discover, 200, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, e.url, c.h, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.code == 0 {
				return
			}
			if code, msg := r.errorCode(t); code != c.code || msg != c.msg {
				t.Fatalf("error %d %q, want %d %q", code, msg, c.code, c.msg)
			}
		})
	}
	// The data of the version mismatch names both values.
	r := post(t, e.url, modernHeaders("server/discover", ""), v999)
	if !contains(r.body, `"data":{"header":"2026-07-28","body":"v999.0.0"}`) {
		t.Fatalf("mismatch data: %s", r.body)
	}
	r = post(t, e.url, set(modernHeaders("server/discover", ""), "MCP-Protocol-Version", ""), discover)
	if !contains(r.body, `"data":{"header":null,"body":"2026-07-28"}`, `"id":"d1"`) {
		t.Fatalf("absent header data: %s", r.body)
	}
}

// The Mcp-Param-<Name> headers of §13.3 (SEP-2243): a tool argument whose
// schema says "x-mcp-header" must be mirrored, exactly, in its header.
func TestModernParamHeaders(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.AddTool(&server.Tool{Name: "mirrored", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return &server.CallToolResult{Content: []server.Content{server.TextContent("ok")}}, nil
		})
	call := func(args string) string {
		return modernBody("1", "tools/call", `"name":"mirrored","arguments":`+args)
	}
	cases := []struct {
		name     string
		headers  []string // Mcp-Param-* name, value pairs
		args     string
		mismatch string // the header named in the error; "" for 200
	}{
		{"both mirrored", []string{"Mcp-Param-Region", "eu", "Mcp-Param-N", "7"}, `{"region":"eu","n":7}`, ""},
		{"base64 value", []string{"Mcp-Param-Region", "=?base64?ZXU=?=", "Mcp-Param-N", "7"}, `{"region":"eu","n":7}`, ""},
		{"argument absent, no header", []string{"Mcp-Param-N", "7"}, `{"n":7}`, ""},
		{"argument null, no header", []string{"Mcp-Param-N", "7"}, `{"region":null,"n":7}`, ""},
		{"string differs", []string{"Mcp-Param-Region", "us", "Mcp-Param-N", "7"}, `{"region":"eu","n":7}`, "Mcp-Param-Region"},
		{"header missing", []string{"Mcp-Param-N", "7"}, `{"region":"eu","n":7}`, "Mcp-Param-Region"},
		{"header without argument", []string{"Mcp-Param-Region", "eu", "Mcp-Param-N", "7"}, `{"n":7}`, "Mcp-Param-Region"},
		{"integer differs", []string{"Mcp-Param-Region", "eu", "Mcp-Param-N", "8"}, `{"region":"eu","n":7}`, "Mcp-Param-N"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := modernHeaders("tools/call", "mirrored")
			for i := 0; i+1 < len(c.headers); i += 2 {
				h.Set(c.headers[i], c.headers[i+1])
			}
			r := post(t, e.url, h, call(c.args))
			if c.mismatch == "" {
				if r.status != 200 || !contains(r.body, `"result"`) {
					t.Fatalf("%d %s, want 200 with a result", r.status, r.body)
				}
				return
			}
			if code, msg := r.errorCode(t); r.status != 400 || code != -32020 || msg != "Request header does not match the request body" ||
				!contains(r.body, `"data":{"header":"`+c.mismatch+`"}`) {
				t.Fatalf("%d %s, want 400 -32020 naming %s", r.status, r.body, c.mismatch)
			}
		})
	}
}

// Case 51: statuses of §13.3.
func TestCase51Statuses(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.call(t, "1", "acme/missing", "", ""); r.status != 404 || !contains(r.body, `"code":-32601`, `"id":1`) {
		t.Fatalf("acme/missing: %d %s", r.status, r.body)
	}
	for _, m := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"} {
		if r := e.call(t, `"m"`, m, "", ""); r.status != 404 || !contains(r.body, `"code":-32601`, "Method not found: "+m) {
			t.Fatalf("%s: %d %s", m, r.status, r.body)
		}
	}
	if r := e.call(t, "1", "tools/call", "missing", `"name":"missing"`); r.status != 200 || !contains(r.body, `"code":-32602`, "Unknown tool: missing") {
		t.Fatalf("tools/call missing: %d %s", r.status, r.body)
	}
	if r := e.call(t, "1", "tools/call", "needs_choice", `"name":"needs_choice"`); r.status != 400 || !contains(r.body, `"code":-32021`) {
		t.Fatalf("needs_choice: %d %s", r.status, r.body)
	}
	for _, m := range []string{nethttp.MethodGet, nethttp.MethodDelete} {
		r := do(t, m, e.url, hdr("Accept", "text/event-stream"), "")
		if r.status != 405 || r.header.Get("Allow") != "POST" {
			t.Fatalf("%s: %d %v", m, r.status, r.header)
		}
	}
	r := post(t, e.url, modernHeaders("notifications/initialized", ""), `{"jsonrpc":"2.0","method":"notifications/initialized","params":{"_meta":`+META+`}}`)
	if r.status != 202 || r.body != "" {
		t.Fatalf("notification: %d %q", r.status, r.body)
	}
	// Session ids are ignored on 2026 traffic: none is minted or needed.
	h := modernHeaders("server/discover", "")
	h.Set("Mcp-Session-Id", "bogus")
	h.Set("Last-Event-ID", "7")
	if r := post(t, e.url, h, discover); r.status != 200 || r.header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("ignored session id: %d %v %s", r.status, r.header, r.body)
	}
	// MRTR: the retry completes.
	r = post(t, e.url, modernHeaders("tools/call", "needs_choice"), strings.Replace(modernBody("1", "tools/call", `"name":"needs_choice"`),
		`clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1))
	var first struct {
		Result struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
		}
	}
	if err := json.Unmarshal([]byte(r.body), &first); err != nil || first.Result.ResultType != "input_required" {
		t.Fatalf("round 1: %d %s", r.status, r.body)
	}
	retry := `"name":"needs_choice","inputResponses":{"choice":{"action":"accept","content":{"label":"chosen"}}},"requestState":"` + first.Result.RequestState + `"`
	r = post(t, e.url, modernHeaders("tools/call", "needs_choice"), strings.Replace(modernBody("2", "tools/call", retry),
		`clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1))
	if r.status != 200 || !contains(r.body, `"resultType":"complete"`, "chosen") {
		t.Fatalf("round 2: %d %s", r.status, r.body)
	}
}

// Case 52: streamed progress, cancellation by closing, listen.
func TestCase52Streams(t *testing.T) {
	e := newEnv(t, nil)
	s := openSSE(t, "POST", e.url, modernHeaders("tools/call", "progress"), progressBody(false))
	if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" || s.resp.Header.Get("X-Accel-Buffering") != "no" ||
		!strings.Contains(s.resp.Header.Get("Cache-Control"), "no-cache") {
		t.Fatalf("headers: %v", s.resp.Header)
	}
	want := []string{`"progress":1,"total":3`, `"progress":2,"total":3`, `"id":5,"result"`}
	for _, w := range want {
		if l := s.must(t); !strings.Contains(l, w) {
			t.Fatalf("event %q, want %s", l, w)
		}
	}
	if _, err := s.next(5 * time.Second); err != errEnded {
		t.Fatalf("the stream did not end after the result: %v", err)
	}

	// Closing the connection mid-request cancels the handler's context.
	s = openSSE(t, "POST", e.url, modernHeaders("tools/call", "progress"), progressBody(true))
	s.must(t)
	s.must(t)
	<-e.started
	s.close()
	select {
	case <-e.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the response did not cancel the handler")
	}

	// A listen answers with SSE, beginning with the acknowledgement.
	listen := modernBody(`"s1"`, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)
	s = openSSE(t, "POST", e.url, modernHeaders("subscriptions/listen", ""), listen)
	if l := s.must(t); !contains(l, "notifications/subscriptions/acknowledged", `"io.modelcontextprotocol/subscriptionId":"s1"`) {
		t.Fatalf("first event %s", l)
	}
	e.changeTools("added")
	if l := s.must(t); !contains(l, "notifications/tools/list_changed", `"s1"`) {
		t.Fatalf("event %s", l)
	}
	h := modernHeaders("subscriptions/listen", "")
	h.Set("Accept", "application/json")
	r := post(t, e.url, h, listen)
	if code, msg := r.errorCode(t); r.status != 406 || code != -32600 || msg != "subscriptions/listen requires Accept: text/event-stream" {
		t.Fatalf("listen without SSE: %d %s", r.status, r.body)
	}
	// Without text/event-stream in Accept, progress is not streamed.
	h = modernHeaders("tools/call", "progress")
	h.Set("Accept", "application/json")
	if r := post(t, e.url, h, progressBody(false)); r.status != 200 || r.header.Get("Content-Type") != "application/json" || !contains(r.body, "finished") {
		t.Fatalf("JSON progress call: %d %v %s", r.status, r.header, r.body)
	}
}

var sessionIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func legacyHeaders(session, version string) nethttp.Header {
	h := hdr("Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if session != "" {
		h.Set("Mcp-Session-Id", session)
	}
	if version != "" {
		h.Set("MCP-Protocol-Version", version)
	}
	return h
}

func initBody(version string) string {
	return `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
}

// initSession initializes a legacy session and returns its id.
func (e *env) initSession(t *testing.T, version string) string {
	t.Helper()
	r := post(t, e.url, legacyHeaders("", ""), initBody(version))
	id := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || id == "" || !contains(r.body, `"protocolVersion":"`+version+`"`) {
		t.Fatalf("initialize: %d %v %s", r.status, r.header, r.body)
	}
	if r := post(t, e.url, legacyHeaders(id, version), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != 202 || r.body != "" {
		t.Fatalf("notifications/initialized: %d %q", r.status, r.body)
	}
	return id
}

// Case 53: legacy sessions.
func TestCase53Sessions(t *testing.T) {
	e := newEnv(t, nil)
	r := post(t, e.url, legacyHeaders("", ""), initBody("2025-11-25"))
	id := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || !sessionIDPattern.MatchString(id) {
		t.Fatalf("initialize: %d %q", r.status, id)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if r := post(t, e.url, legacyHeaders(id, "2025-11-25"), list); r.status != 200 || !contains(r.body, `"tools":[`) || contains(r.body, "resultType") {
		t.Fatalf("tools/list: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, legacyHeaders(id, ""), list); r.status != 200 || !contains(r.body, `"tools":[`) {
		t.Fatalf("tools/list without the version header: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, legacyHeaders(id, "2025-06-18"), list); r.status != 400 || !contains(r.body, "MCP-Protocol-Version header does not match the session") {
		t.Fatalf("other version: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, legacyHeaders(id, "2025-03-26"), list); r.status != 200 || !contains(r.body, `"tools":[`) {
		t.Fatalf("an older version header: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, legacyHeaders(id, "bogus"), list); r.status != 400 {
		t.Fatalf("a bogus version header: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, legacyHeaders("bogus", "2025-11-25"), list); r.status != 404 || !contains(r.body, `"code":-32600`, "Session not found") {
		t.Fatalf("bogus session: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, legacyHeaders("", ""), list); r.status != 400 || !contains(r.body, "Missing Mcp-Session-Id header", `"id":2`) {
		t.Fatalf("no session: %d %s", r.status, r.body)
	}
	// A stale session id on initialize mints a new session.
	r = post(t, e.url, legacyHeaders("stale", "2025-06-18"), initBody("2025-06-18"))
	if r.status != 200 || r.header.Get("Mcp-Session-Id") == "" || r.header.Get("Mcp-Session-Id") == "stale" {
		t.Fatalf("initialize with a stale id: %d %v", r.status, r.header)
	}
}

// Case 54: notifications, errors, the GET stream, DELETE.
func TestCase54SessionStream(t *testing.T) {
	e := newEnv(t, nil)
	id := e.initSession(t, "2025-11-25")
	if r := post(t, e.url, legacyHeaders(id, ""), `{"jsonrpc":"2.0","id":3,"method":"foo/bar"}`); r.status != 200 || !contains(r.body, `"code":-32601`) {
		t.Fatalf("foo/bar: %d %s", r.status, r.body)
	}
	get := legacyHeaders(id, "2025-11-25")
	s := openSSE(t, "GET", e.url, get, "")
	if s.resp.StatusCode != 200 || s.resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %d %v", s.resp.StatusCode, s.resp.Header)
	}
	if r := do(t, "GET", e.url, get, ""); r.status != 409 {
		t.Fatalf("second GET: %d %s", r.status, r.body)
	}
	e.changeTools("changed")
	if l := s.must(t); l != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
		t.Fatalf("event %s", l)
	}
	if r := do(t, "DELETE", e.url, hdr("Mcp-Session-Id", id), ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := s.next(5 * time.Second); err != errEnded {
		t.Fatalf("the stream outlived its session: %v", err)
	}
	if r := post(t, e.url, legacyHeaders(id, ""), `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); r.status != 404 {
		t.Fatalf("after DELETE: %d %s", r.status, r.body)
	}
	if r := do(t, "DELETE", e.url, hdr("Mcp-Session-Id", id), ""); r.status != 404 {
		t.Fatalf("second DELETE: %d", r.status)
	}
}

// A legacy session's notifications/cancelled withdraws its request only
// when it is valid by docs/transport.md §9: one with a reason that is not
// a string leaves the request in flight (its id is still taken), and a
// valid one ends it with 204 and cancels its handler.
func TestLegacyCancellation(t *testing.T) {
	e := newEnv(t, nil)
	id := e.initSession(t, "2025-11-25")
	h := legacyHeaders(id, "2025-11-25")
	h.Set("Accept", "application/json")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block"}}`
	answered := make(chan reply, 1)
	go func() { answered <- post(t, e.url, h, call) }()
	if got := <-e.started; got != "block" {
		t.Fatalf("started %q", got)
	}
	cancel := func(params string) {
		t.Helper()
		if r := post(t, e.url, h, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":`+params+`}`); r.status != 202 || r.body != "" {
			t.Fatalf("cancellation %s: %d %q", params, r.status, r.body)
		}
	}
	cancel(`{"requestId":7,"reason":3}`)
	dup := make(chan reply, 1)
	go func() { dup <- post(t, e.url, h, call) }()
	select {
	case r := <-dup:
		if code, msg := r.errorCode(t); r.status != 400 || code != -32600 || msg != "Duplicate in-flight request id" {
			t.Fatalf("the id after an invalid cancellation: %d %s, want 400 for an id in flight", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an invalid cancellation withdrew the request: its id was admitted again")
	}
	cancel(`{"requestId":7,"reason":"stop"}`)
	if r := <-answered; r.status != 204 || r.body != "" {
		t.Fatalf("the cancelled call: %d %q, want 204 and no body", r.status, r.body)
	}
	if got := <-e.cancelled; got != "block" {
		t.Fatalf("cancelled %q", got)
	}
}
