package stdio_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// Cases 11 to 23 and 25: what one line gets, exactly. An empty want means no
// output at all; "result:<id>" means a result for that id.
func TestClassification(t *testing.T) {
	parseErr := errLine("null", -32700, "Parse error")
	invalid := errLine("null", -32600, "Invalid Request")
	idType := errLine("null", -32600, "Request id must be a string or integer")
	idBounds := errLine("null", -32600, "Request id must be a string of at most 256 bytes or an int64 integer")
	digits := func(n int) string { return strings.Repeat("7", n) }
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cases := []struct {
		name, line, want string
	}{
		{"not json", `{not-json}`, parseErr},
		{"empty batch", `[]`, invalid},
		{"trailing garbage", req(3, "tools/list", `{}`) + ` x`, parseErr},
		{"trailing spaces", req(3, "tools/list", `{}`) + `   `, "result:3"},
		{"duplicate top-level", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","params":{"_meta":` + meta + `}}`, parseErr},
		{"duplicate in arguments", call(1, "echo", `{"text":"a","text":"b"}`), parseErr},
		{"duplicate after unescaping", call(1, "echo", `{"a":1,"\u0061":2}`), parseErr},
		{"64 digits", call(1, "echo", `{"text":"x","n":`+digits(64)+`}`), "result:1"},
		{"65 digits", call(1, "echo", `{"text":"x","n":`+digits(65)+`}`), parseErr},
		{"minus 64 digits", call(1, "echo", `{"text":"x","n":-`+digits(64)+`}`), "result:1"},
		{"minus 65 digits", call(1, "echo", `{"text":"x","n":-`+digits(65)+`}`), parseErr},
		{"1.5 million digits", call(1, "echo", `{"text":"x","n":`+digits(1_500_000)+`}`), parseErr},
		{"byte FF in a string", call(1, "echo", "{\"text\":\"a\xffb\"}"), parseErr},
		{"1000 nested", call(1, "echo", `{"text":"x","n":`+nested(1000)+`}`), "result:1"},
		{"1001 nested", call(1, "echo", `{"text":"x","n":`+nested(1001)+`}`), parseErr},
		{"number", `1`, invalid},
		{"string", `"x"`, invalid},
		{"true", `true`, invalid},
		{"null", `null`, invalid},
		{"batch", `[` + req(1, "tools/list", `{}`) + `]`, invalid},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, errLine("7", -32600, "Expected a JSON-RPC 2.0 request")},
		{"no method", `{"jsonrpc":"2.0","id":7}`, errLine("7", -32600, "Request method must be a string")},
		{"params array", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}`, errLine("7", -32602, "Request params must be an object")},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, idType},
		{"id 1.5", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, idType},
		{"id 1e2", `{"jsonrpc":"2.0","id":1e2,"method":"ping"}`, idType},
		{"id true", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, idType},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, idType},
		{"256-byte id", req(strings.Repeat("i", 256), "tools/list", `{}`), "result:" + fmt.Sprintf("%q", strings.Repeat("i", 256))},
		{"min int64 id", req(json.Number("-9223372036854775808"), "tools/list", `{}`), "result:-9223372036854775808"},
		{"max int64 id", req(json.Number("9223372036854775807"), "tools/list", `{}`), "result:9223372036854775807"},
		{"257-byte id", req(strings.Repeat("i", 257), "tools/list", `{}`), idBounds},
		{"2^63 id", req(json.Number("9223372036854775808"), "tools/list", `{}`), idBounds},
		{"-2^63-1 id", req(json.Number("-9223372036854775809"), "tools/list", `{}`), idBounds},
		{"string id", req("abc", "tools/list", `{}`), `result:"abc"`},
		{"zero id", req(0, "tools/list", `{}`), "result:0"},
		{"number id", req(42, "tools/list", `{}`), "result:42"},
		{"request without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, ""},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/bogus"}`, ""},
		{"malformed notification", `{"jsonrpc":"1.0","method":"x","params":5}`, ""},
		{"client result", `{"jsonrpc":"2.0","id":999,"result":{}}`, ""},
		{"client error", `{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"x"}}`, ""},
	}
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		for _, c := range cases {
			h.send(c.line)
			// A ping after each line separates their outputs in order.
			h.send(req("sep", "tools/list", `{}`))
			got := h.line()
			switch {
			case c.want == "":
				if id := string(parse(t, got).ID); id != `"sep"` {
					t.Errorf("%s: want no output, got %s", c.name, got)
					continue
				}
				continue
			case strings.HasPrefix(c.want, "result:"):
				// Both lines are results from the executor, in either order.
				want := strings.TrimPrefix(c.want, "result:")
				pair := []frame{parse(t, got), parse(t, h.line())}
				if string(pair[0].ID) == `"sep"` {
					pair[0], pair[1] = pair[1], pair[0]
				}
				if pair[0].Result == nil || string(pair[0].ID) != want || string(pair[1].ID) != `"sep"` {
					t.Errorf("%s: want a result for %s, got %.200s", c.name, want, got)
				}
				continue
			default:
				if got != c.want {
					t.Errorf("%s:\ngot  %.300s\nwant %s", c.name, got, c.want)
				}
			}
			if id := string(parse(t, h.line()).ID); id != `"sep"` {
				t.Fatalf("%s: more than one line", c.name)
			}
		}
		// The tool never ran for the request sent without an id.
		if _, ran := h.cat.ran.Load(protocol.ID{}); ran {
			t.Error("a request without an id ran")
		}
		h.finish()
	})
}

// Case 21: an over-long id appears nowhere in the output.
func TestLongIDNeverEchoed(t *testing.T) {
	h := start(t, pipes)
	id := strings.Repeat("z", 300)
	h.send(req(id, "tools/list", `{}`), `{"jsonrpc":"1.0","id":"`+id+`","method":"x"}`, `{"jsonrpc":"2.0","id":"`+id+`"}`)
	for range 3 {
		if l := h.line(); strings.Contains(l, "zzz") {
			t.Fatalf("long id echoed: %s", l)
		}
	}
	h.finish()
}
