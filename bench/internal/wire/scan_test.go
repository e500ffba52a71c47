package wire

import (
	"strings"
	"testing"
)

func TestMembers(t *testing.T) {
	line := []byte(` {"jsonrpc":"2.0", "id" : 42,"params":{"text":"a \"quoted\" } ] , text","n":[1,{"x":"}"}]},"ok":true,"none":null} `)
	var keys, values []string
	ok := Members(line, func(k, v []byte) bool {
		keys = append(keys, string(k))
		values = append(values, string(v))
		return true
	})
	if !ok {
		t.Fatal("Members reported a malformed object")
	}
	want := []string{"jsonrpc", "id", "params", "ok", "none"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("keys = %q, want %q", keys, want)
	}
	if values[1] != "42" || values[3] != "true" || values[4] != "null" {
		t.Errorf("values = %q", values)
	}
	if got := string(Path(line, "params", "text")); got != `"a \"quoted\" } ] , text"` {
		t.Errorf("params.text = %s", got)
	}
	if got := string(Path(line, "params", "n")); got != `[1,{"x":"}"}]` {
		t.Errorf("params.n = %s", got)
	}
	if Path(line, "params", "missing") != nil {
		t.Error("a missing member was found")
	}
}

func TestMembersMalformed(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"a"}`, `{"a":1`, `{"a":"unterminated}`, `{"a":1 "b":2}`, `{a:1}`} {
		if Members([]byte(in), func(_, _ []byte) bool { return true }) {
			t.Errorf("Members(%q) = true, want false", in)
		}
	}
	if !Members([]byte(`{}`), func(_, _ []byte) bool { return true }) {
		t.Error(`Members("{}") = false`)
	}
}

func TestEscapedBackslashBeforeQuote(t *testing.T) {
	// "a\\" ends at its second quote: the backslash is itself escaped.
	got := string(Member([]byte(`{"t":"a\\","u":1}`), "u"))
	if got != "1" {
		t.Errorf(`u = %q, want 1`, got)
	}
}

func TestInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "42": 42, "-7": -7, "1000000": 1_000_000} {
		if got, ok := Int([]byte(in)); !ok || got != want {
			t.Errorf("Int(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-", "1.5", "1e3", `"1"`, "null", "1234567890123456789"} {
		if _, ok := Int([]byte(in)); ok {
			t.Errorf("Int(%q) ok, want not", in)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		kind Kind
		id   string
	}{
		{`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"bench-3"}],"isError":false}}`, Result, "3"},
		{`{"result":{},"jsonrpc":"2.0","id":"x"}`, Result, `"x"`},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too long"}}`, Error, "null"},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, Notification, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`, Request, "1"},
		{`not json`, Malformed, ""},
		{`{"jsonrpc":"2.0","id":1}`, Malformed, "1"},
	} {
		f := Parse([]byte(tc.line))
		if f.Kind != tc.kind || string(f.ID) != tc.id {
			t.Errorf("Parse(%s) = %v id %q, want %v id %q", tc.line, f.Kind, f.ID, tc.kind, tc.id)
		}
	}
	f := Parse([]byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[ {"type":"text","text":"bench-3"},{"type":"text","text":"second"}],"isError":false,"resultType":"complete"}}`))
	if string(f.Text()) != "bench-3" || f.IsError() || !f.Modern() {
		t.Errorf("Text %q, IsError %v, Modern %v", f.Text(), f.IsError(), f.Modern())
	}
	e := Parse([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Message exceeds \"the\" limit"}}`))
	if code, msg := e.ErrorCode(); code != -32600 || msg != `Message exceeds "the" limit` {
		t.Errorf("ErrorCode = %d %q", code, msg)
	}
}

func TestDialect(t *testing.T) {
	legacy := Dialect{Version: V20250618}
	if got := string(legacy.Echo(nil, 9)); got != `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench-9"}}}`+"\n" {
		t.Errorf("2025 echo = %s", got)
	}
	modern := Dialect{Version: V20260728}
	line := modern.EchoOf(nil, 10, 5)
	f := Parse(line[:len(line)-1])
	if f.Kind != Request || string(Path(line, "params", "arguments", "text")) != `"yyyyy"` ||
		string(Path(line, "params", "_meta", "io.modelcontextprotocol/protocolVersion")) != `"2026-07-28"` ||
		Path(line, "params", "_meta", "io.modelcontextprotocol/clientCapabilities") == nil {
		t.Errorf("2026 echo = %s", line)
	}
	if !modern.Stateless() || legacy.Stateless() {
		t.Error("Stateless is wrong")
	}
}
