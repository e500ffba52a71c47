package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
	"testing"
)

// Helpers after docs/transport.md §16 "Conventions".
const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// req is REQ(id, m, p): p is an object's members without braces.
func req(id, method, members string) string {
	if members != "" {
		members += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + members + `"_meta":` + meta + `}}`
}

// call is REQ(id, "tools/call", {"name":"echo","arguments":arguments}).
func call(id, arguments string) string {
	return req(id, "tools/call", `"name":"echo","arguments":`+arguments)
}

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

func strID(n int) string { return `"` + strings.Repeat("x", n) + `"` }

// want is the expected classification of a line. Method and Params are
// checked only when set.
type want struct {
	kind   Kind
	id     ID
	err    *Error
	method string
}

var (
	blank        = want{kind: KindBlank}
	parseErr     = want{kind: KindInvalid, err: ErrParse}
	invalid      = want{kind: KindInvalid, err: ErrInvalidRequest}
	response     = want{kind: KindResponse}
	idTypeErr    = want{kind: KindInvalid, err: ErrIDType}
	idBoundsErr  = want{kind: KindInvalid, err: ErrIDBounds}
	surrogateErr = want{kind: KindInvalid, err: ErrIDSurrogate}
	notification = func(m string) want { return want{kind: KindNotification, method: m} }
	request      = func(id ID, m string) want { return want{kind: KindRequest, id: id, method: m} }
	served       = request(IntID(1), "tools/call")
)

var decodeCases = []struct {
	name string
	line string
	want want
}{
	// §16 case 2: CRLF framing.
	{"crlf a", call(`"a"`, `{"text":"one"}`) + "\r\n", request(StringID("a"), "tools/call")},
	{"crlf b", call(`"b"`, `{"text":"two"}`) + "\r\n", request(StringID("b"), "tools/call")},
	// §16 case 3: blank lines.
	{"empty", "\n", blank},
	{"empty unterminated", "", blank},
	{"spaces tabs cr", "   \t\r\n", blank},
	{"cr", "\r\n", blank},
	{"bom only", "\xEF\xBB\xBF\n", blank},
	{"bom spaces", "\xEF\xBB\xBF \t\r", blank},
	{"after blanks", req("1", "tools/list", ""), request(IntID(1), "tools/list")},
	// §16 case 4 and §4 step 1: one BOM is stripped, on any line.
	{"bom request", "\xEF\xBB\xBF" + req("1", "tools/list", "") + "\n", request(IntID(1), "tools/list")},
	{"two boms", "\xEF\xBB\xBF\xEF\xBB\xBF" + req("1", "tools/list", ""), parseErr},
	{"bom after space", " \xEF\xBB\xBF" + req("1", "tools/list", ""), parseErr},
	// §16 case 7.
	{"split a", `{"a":1}` + "\r\n", want{kind: KindInvalid, err: ErrNotJSONRPC2}},
	{"split b", `{"b":2}` + "\n", want{kind: KindInvalid, err: ErrNotJSONRPC2}},
	// §16 case 11.
	{"not json", "{not-json}\n", parseErr},
	{"empty batch", "[]\n", invalid},
	{"tools/list 3", req("3", "tools/list", ""), request(IntID(3), "tools/list")},
	{"truncated", `{"jsonrpc":"2.0","id":1,`, parseErr},
	// §16 case 12 and §4 step 2.
	{"trailing x", req("1", "tools/list", "") + " x", parseErr},
	{"trailing second value", `{"a":1} {"a":1}`, parseErr},
	{"trailing spaces", req("1", "tools/list", "") + "  \t \r\n", request(IntID(1), "tools/list")},
	{"leading spaces", " \t" + req("1", "tools/list", ""), request(IntID(1), "tools/list")},
	{"array with trailing spaces", "[-1, 2.5]  ", invalid},
	// §16 case 13: duplicate names, compared after unescaping.
	{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","params":{"_meta":` + meta + `}}`, parseErr},
	{"duplicate in arguments", call("1", `{"text":"a","text":"b"}`), parseErr},
	{"duplicate deep", call("1", `{"x":[{"y":{"z":1,"z":2}}]}`), parseErr},
	{"a and escaped a", `{"a":1,"\u0061":2}`, parseErr},
	{"escaped both", `{"\u0061":1,"\u0061":2}`, parseErr},
	{"solidus escape", `{"a/b":1,"a\/b":2}`, parseErr},
	{"same name in siblings", call("1", `{"x":{"n":1},"y":{"n":1},"n":1}`), served},
	{"same name nested", call("1", `{"n":{"n":{"n":1}}}`), served},
	{"names differ by case", `{"a":1,"A":2,"jsonrpc":"2.0","id":1,"method":"m"}`, request(IntID(1), "m")},
	// §16 case 14: integer literals of at most 64 digits.
	{"64 digits", call("1", `{"n":`+strings.Repeat("9", 64)+`}`), served},
	{"65 digits", call("1", `{"n":`+strings.Repeat("9", 65)+`}`), parseErr},
	{"minus 64 digits", call("1", `{"n":-`+strings.Repeat("9", 64)+`}`), served},
	{"minus 65 digits", call("1", `{"n":-`+strings.Repeat("9", 65)+`}`), parseErr},
	{"65 digits with fraction", call("1", `{"n":`+strings.Repeat("9", 65)+`.5}`), served},
	{"65 digits with exponent", call("1", `{"n":`+strings.Repeat("1", 65)+`e2}`), served},
	// §4: finite float64 only.
	{"1e400", call("1", `{"n":1e400}`), parseErr},
	{"-1e400", call("1", `{"n":-1e400}`), parseErr},
	{"1.8e308", call("1", `{"n":1.8e308}`), parseErr},
	{"1.7e308", call("1", `{"n":1.7e308}`), served},
	{"1e-400 underflows to zero", call("1", `{"n":1e-400}`), served},
	{"small mantissa big exponent", call("1", `{"n":0.0001e310}`), served},
	{"400 digit float", call("1", `{"n":`+strings.Repeat("9", 400)+`.0}`), parseErr},
	{"400 digit float scaled down", call("1", `{"n":`+strings.Repeat("9", 400)+`.0e-200}`), served},
	{"huge exponent", call("1", `{"n":1e99999999999999999999}`), parseErr},
	{"huge negative exponent", call("1", `{"n":1e-99999999999999999999}`), served},
	// Number grammar.
	{"leading zero", `[01]`, parseErr},
	{"minus alone", `[-]`, parseErr},
	{"dot without digits", `[1.]`, parseErr},
	{"exponent without digits", `[1e+]`, parseErr},
	{"plus sign", `[+1]`, parseErr},
	{"good numbers", `[0,-0,0.5,-0.5e-3,1E+2,10]`, invalid},
	// §16 case 16 and §4: UTF-8.
	{"FF in string", call("1", "{\"text\":\"a\xFFb\"}"), parseErr},
	{"FF outside string", "{\"a\":1}\xFF", parseErr},
	{"FF in name", "{\"\xFF\":1}", parseErr},
	{"encoded surrogate", call("1", "{\"text\":\"\xED\xA0\x80\"}"), parseErr},
	{"overlong encoding", call("1", "{\"text\":\"\xC0\xAF\"}"), parseErr},
	{"truncated rune", call("1", "{\"text\":\"\xE6\x97\"}"), parseErr},
	{"valid UTF-8", call("1", `{"text":"héllo 日本 😀"}`), served},
	{"escaped lone surrogate", call("1", `{"text":"\ud800"}`), served},
	{"escaped low surrogate", call("1", `{"text":"\udc00\ud800x"}`), served},
	// String grammar.
	{"raw control char", call("1", "{\"text\":\"a\tb\"}"), parseErr},
	{"bad escape", call("1", `{"text":"\x41"}`), parseErr},
	{"short unicode escape", call("1", `{"text":"\u12"}`), parseErr},
	{"bad hex", call("1", `{"text":"\u12g4"}`), parseErr},
	{"all escapes", call("1", `{"text":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`), served},
	{"unterminated string", `{"a":"abc`, parseErr},
	// §16 case 17 and §4: nesting. Arrays in arrays and objects in objects
	// are bounded separately; see maxNesting.
	{"1000 arrays in arguments", call("1", `{"deep":`+nested("[", "]", 1000)+`}`), served},
	{"1001 arrays in arguments", call("1", `{"deep":`+nested("[", "]", 1001)+`}`), parseErr},
	{"1000 arrays", nested("[", "]", 1000), invalid},
	{"1001 arrays", nested("[", "]", 1001), parseErr},
	{"1000 objects", strings.Repeat(`{"a":`, 999) + "{}" + strings.Repeat("}", 999), want{kind: KindInvalid, err: ErrNotJSONRPC2}},
	{"1001 objects", strings.Repeat(`{"a":`, 1000) + "{}" + strings.Repeat("}", 1000), parseErr},
	{"1000 arrays unclosed", strings.Repeat("[", 1000), parseErr},
	// §16 case 18 and §5 row 1.
	{"number", "1", invalid},
	{"string", `"x"`, invalid},
	{"true", "true", invalid},
	{"false", "false", invalid},
	{"null", "null", invalid},
	{"batch", "[" + req("1", "tools/list", "") + "]", invalid},
	{"bad literal", "nul", parseErr},
	// §16 case 19: rows 4, 7, 8.
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, want{kind: KindInvalid, id: IntID(7), err: ErrNotJSONRPC2}},
	{"jsonrpc missing", `{"id":"x","method":"tools/list"}`, want{kind: KindInvalid, id: StringID("x"), err: ErrNotJSONRPC2}},
	{"jsonrpc number", `{"jsonrpc":2,"id":7,"method":"tools/list"}`, want{kind: KindInvalid, id: IntID(7), err: ErrNotJSONRPC2}},
	{"jsonrpc wrong, id float", `{"jsonrpc":"1.0","id":1.5,"method":"m"}`, want{kind: KindInvalid, err: ErrNotJSONRPC2}},
	{"jsonrpc wrong, id too long", `{"jsonrpc":"1.0","id":` + strID(257) + `,"method":"m"}`, want{kind: KindInvalid, err: ErrNotJSONRPC2}},
	{"jsonrpc escaped", `{"jsonrpc":"2\u002e0","id":7,"method":"m"}`, request(IntID(7), "m")},
	{"method missing", `{"jsonrpc":"2.0","id":7}`, want{kind: KindInvalid, id: IntID(7), err: ErrMethodType}},
	{"method number", `{"jsonrpc":"2.0","id":7,"method":1}`, want{kind: KindInvalid, id: IntID(7), err: ErrMethodType}},
	{"method missing no id", `{"jsonrpc":"2.0"}`, want{kind: KindInvalid, err: ErrMethodType}},
	{"method not string no id", `{"jsonrpc":"2.0","method":null}`, want{kind: KindInvalid, err: ErrMethodType}},
	{"params array", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}`, want{kind: KindInvalid, id: IntID(7), err: ErrParamsType}},
	{"params null", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":null}`, want{kind: KindInvalid, id: IntID(7), err: ErrParamsType}},
	{"params string", `{"jsonrpc":"2.0","id":"s","method":"tools/list","params":"x"}`, want{kind: KindInvalid, id: StringID("s"), err: ErrParamsType}},
	{"params absent", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, request(IntID(7), "tools/list")},
	{"method and result", `{"jsonrpc":"2.0","id":7,"method":"m","result":{}}`, request(IntID(7), "m")},
	{"method and error", `{"jsonrpc":"2.0","id":7,"method":"m","error":{"code":1,"message":"x"}}`, request(IntID(7), "m")},
	// §5 row 2a: method, result and error together are refused.
	{"method, result and error", `{"jsonrpc":"2.0","id":7,"method":"tools/call","result":{},"error":{"code":1,"message":"x"}}`, want{kind: KindInvalid, id: IntID(7), err: ErrAmbiguous}},
	{"method, result and error, no id", `{"jsonrpc":"2.0","method":"notifications/x","result":null,"error":null}`, want{kind: KindInvalid, err: ErrAmbiguous}},
	{"method, result and error, bad id", `{"jsonrpc":"2.0","id":1.5,"method":"m","result":1,"error":1}`, want{kind: KindInvalid, err: ErrAmbiguous}},
	{"escaped member names", `{"jsonr\u0070c":"2.0","\u0069d":7,"meth\u006fd":"tools\/list"}`, request(IntID(7), "tools/list")},
	// §16 case 20: row 5.
	{"id null", `{"jsonrpc":"2.0","id":null,"method":"m"}`, idTypeErr},
	{"id 1.5", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, idTypeErr},
	{"id 1e2", `{"jsonrpc":"2.0","id":1e2,"method":"m"}`, idTypeErr},
	{"id 1.0", `{"jsonrpc":"2.0","id":1.0,"method":"m"}`, idTypeErr},
	{"id true", `{"jsonrpc":"2.0","id":true,"method":"m"}`, idTypeErr},
	{"id object", `{"jsonrpc":"2.0","id":{},"method":"m"}`, idTypeErr},
	{"id array", `{"jsonrpc":"2.0","id":[],"method":"m"}`, idTypeErr},
	{"id type before method", `{"jsonrpc":"2.0","id":null}`, idTypeErr},
	// §16 case 21: row 6.
	{"id 256 bytes", req(strID(256), "tools/list", ""), request(StringID(strings.Repeat("x", 256)), "tools/list")},
	{"id 257 bytes", req(strID(257), "tools/list", ""), idBoundsErr},
	{"id 300 bytes", req(strID(300), "tools/list", ""), idBoundsErr},
	{"id 100k bytes", req(strID(100000), "tools/list", ""), idBoundsErr},
	{"id escapes 256", req(`"`+strings.Repeat(`\u0078`, 256)+`"`, "m", ""), request(StringID(strings.Repeat("x", 256)), "m")},
	{"id escapes 257", req(`"`+strings.Repeat(`\u0078`, 257)+`"`, "m", ""), idBoundsErr},
	{"id multibyte 256", req(`"`+strings.Repeat("é", 128)+`"`, "m", ""), request(StringID(strings.Repeat("é", 128)), "m")},
	{"id multibyte 258", req(`"`+strings.Repeat(`\u00e9`, 129)+`"`, "m", ""), idBoundsErr},
	{"id min int64", req("-9223372036854775808", "m", ""), request(IntID(-1<<63), "m")},
	{"id max int64", req("9223372036854775807", "m", ""), request(IntID(1<<63-1), "m")},
	{"id 2^63", req("9223372036854775808", "m", ""), idBoundsErr},
	{"id -2^63-1", req("-9223372036854775809", "m", ""), idBoundsErr},
	{"id 20 digits", req("10000000000000000000", "m", ""), idBoundsErr},
	{"id 64 digits", req(strings.Repeat("9", 64), "m", ""), idBoundsErr},
	// §16 case 22: ids keep their type.
	{"id abc", req(`"abc"`, "tools/list", ""), request(StringID("abc"), "tools/list")},
	{"id 0", req("0", "tools/list", ""), request(IntID(0), "tools/list")},
	{"id -0", req("-0", "tools/list", ""), request(IntID(0), "tools/list")},
	{"id 42", req("42", "tools/list", ""), request(IntID(42), "tools/list")},
	{"id string 42", req(`"42"`, "tools/list", ""), request(StringID("42"), "tools/list")},
	{"id empty string", req(`""`, "tools/list", ""), request(StringID(""), "tools/list")},
	// §5 row 6a: an id with a lone surrogate escape is refused,
	// never rewritten to U+FFFD (the answer would carry another id, and
	// "\ud800", "\udbff" and "\udc00" would all be one id).
	{"id lone surrogate", req(`"\ud800"`, "m", ""), surrogateErr},
	{"id lone low surrogate", req(`"\udc00"`, "m", ""), surrogateErr},
	{"id two high surrogates", req(`"\ud800\ud800"`, "m", ""), surrogateErr},
	{"id surrogate then text", req(`"a\uDBFFz"`, "m", ""), surrogateErr},
	{"id pair then lone", req(`"\ud83d\ude00\udc00"`, "m", ""), surrogateErr},
	{"id surrogate pair", req(`"\ud83d\ude00"`, "m", ""), request(StringID("😀"), "m")},
	{"id escaped backslash then u", req(`"\\ud800"`, "m", ""), request(StringID(`\ud800`), "m")},
	{"id raw U+FFFD", req(`"\ufffd"`, "m", ""), request(StringID("\uFFFD"), "m")},
	{"id lone surrogate wrong jsonrpc", `{"jsonrpc":"1.0","id":"\ud800","method":"m"}`, want{kind: KindInvalid, err: ErrNotJSONRPC2}},
	{"response lone surrogate id", `{"jsonrpc":"2.0","id":"\ud800","result":{}}`, response},
	// §16 case 23: notifications, whatever else is wrong.
	{"call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, notification("tools/call")},
	{"bogus notification", `{"jsonrpc":"2.0","method":"notifications/bogus"}`, notification("notifications/bogus")},
	{"notification wrong jsonrpc", `{"jsonrpc":"1.0","method":"x","params":5}`, notification("x")},
	{"notification no jsonrpc", `{"method":"x","params":[]}`, notification("x")},
	// §16 case 25 and §5 row 2: responses.
	{"result", `{"jsonrpc":"2.0","id":999,"result":{}}`, want{kind: KindResponse, id: IntID(999)}},
	{"error", `{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"x"}}`, want{kind: KindResponse, id: IntID(5)}},
	{"snodod id", `{"jsonrpc":"2.0","id":"snodod:1","result":{}}`, want{kind: KindResponse, id: StringID("snodod:1")}},
	{"result without anything", `{"result":null}`, response},
	{"response with bad id", `{"id":1.5,"result":1}`, response},
	{"method not string with result", `{"jsonrpc":"2.0","method":1,"result":{}}`, want{kind: KindInvalid, err: ErrMethodType}},
}

// TestDecodeResponse pins what a client response carries (docs/transport.md
// §7.1): its result and error members as they were sent.
func TestDecodeResponse(t *testing.T) {
	for _, tc := range []struct {
		line          string
		result, error string
	}{
		{`{"jsonrpc":"2.0","id":"snodod:1","result":{"a": 1}}`, `{"a": 1}`, ""},
		{`{"jsonrpc":"2.0","id":"snodod:2","error":{"code":-1,"message":"no"}}`, "", `{"code":-1,"message":"no"}`},
		{`{"id":"snodod:3","result":null,"error":[]}`, "null", "[]"},
	} {
		m := Decode([]byte(tc.line))
		if m.Kind != KindResponse || string(m.Result) != tc.result || string(m.ErrorObject) != tc.error {
			t.Errorf("Decode(%s) = kind %d result %q error %q; want result %q error %q", tc.line, m.Kind, m.Result, m.ErrorObject, tc.result, tc.error)
		}
	}
}

func TestDecodeErrorObject(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want *Error
	}{
		{`{"code":-1,"message":"User declined"}`, &Error{Code: -1, Message: "User declined"}},
		{`{"code":5,"message":"x","data":{"k":[1]}}`, &Error{Code: 5, Message: "x", Data: json.RawMessage(`{"k":[1]}`)}},
		{`{"code":1.5,"message":"x"}`, nil},
		{`{"code":"1","message":"x"}`, nil},
		{`{"code":1}`, nil},
		{`{"message":"x"}`, nil},
		{`[]`, nil},
		{`null`, nil},
	} {
		got, ok := DecodeErrorObject(json.RawMessage(tc.raw))
		if ok != (tc.want != nil) {
			t.Errorf("DecodeErrorObject(%s) ok = %v", tc.raw, ok)
			continue
		}
		if ok && (got.Code != tc.want.Code || got.Message != tc.want.Message || fmt.Sprint(got.Data) != fmt.Sprint(tc.want.Data)) {
			t.Errorf("DecodeErrorObject(%s) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			m := Decode([]byte(tc.line))
			if m.Kind != tc.want.kind || m.ID != tc.want.id || m.Err != tc.want.err {
				t.Fatalf("Decode(%.80q) = kind %d id %v err %v; want kind %d id %v err %v",
					tc.line, m.Kind, m.ID, m.Err, tc.want.kind, tc.want.id, tc.want.err)
			}
			if tc.want.method != "" && m.Method != tc.want.method {
				t.Errorf("Method = %q, want %q", m.Method, tc.want.method)
			}
			if m.Kind != KindRequest && m.Kind != KindNotification && (m.Method != "" || m.Params != nil || m.Modern || m.ProgressToken != nil) {
				t.Errorf("kind %d carries request fields: %+v", m.Kind, m)
			}
			if m.Params != nil && !json.Valid(m.Params) {
				t.Errorf("Params is not valid JSON: %q", m.Params)
			}
		})
	}
}

func TestDecodeParams(t *testing.T) {
	tests := []struct {
		name, line, params string
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"m","params":{ "a" : [1, 2] }}`, `{ "a" : [1, 2] }`},
		{"absent", `{"jsonrpc":"2.0","id":1,"method":"m"}`, ""},
		{"empty", `{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`, `{}`},
		{"notification object", `{"method":"n","params":{"x":1}}`, `{"x":1}`},
		{"notification not object", `{"method":"n","params":[1]}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := Decode([]byte(tc.line))
			if tc.params == "" && m.Params != nil || string(m.Params) != tc.params {
				t.Errorf("Params = %q, want %q", m.Params, tc.params)
			}
		})
	}
}

func TestDecodeMeta(t *testing.T) {
	const version = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	tests := []struct {
		name   string
		params string
		modern bool
		token  string // "" means nil
	}{
		{"both", `{"_meta":{` + version + `,"progressToken":"tok"}}`, true, `"tok"`},
		{"integer token", `{"_meta":{"progressToken":0}}`, false, `0`},
		{"token kept raw", `{"_meta":{"progressToken": {"a" : 1} }}`, false, `{"a" : 1}`},
		{"float token kept", `{"_meta":{"progressToken":1.5}}`, false, `1.5`},
		{"version any value", `{"_meta":{"io.modelcontextprotocol/protocolVersion":null}}`, true, ""},
		{"version escaped name", `{"_meta":{"io.modelcontextprotocol\/protocolVersion":1}}`, true, ""},
		{"absent", `{"name":"x"}`, false, ""},
		{"empty meta", `{"_meta":{}}`, false, ""},
		{"meta not object", `{"_meta":[{"progressToken":"t",` + version + `}]}`, false, ""},
		{"meta string", `{"_meta":"progressToken"}`, false, ""},
		{"nested deeper", `{"arguments":{"_meta":{` + version + `,"progressToken":"t"}}}`, false, ""},
		{"inside meta member", `{"_meta":{"x":{` + version + `,"progressToken":"t"}}}`, false, ""},
		{"meta after arguments", `{"arguments":{"progressToken":"no"},"_meta":{"progressToken":"yes"}}`, false, `"yes"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, line := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"m","params":` + tc.params + `}`,
				`{"method":"n","params":` + tc.params + `}`,
			} {
				m := Decode([]byte(line))
				if m.Kind != KindRequest && m.Kind != KindNotification {
					t.Fatalf("kind %d err %v", m.Kind, m.Err)
				}
				if m.Modern != tc.modern {
					t.Errorf("%s: Modern = %v, want %v", line, m.Modern, tc.modern)
				}
				if got := string(m.ProgressToken); got != tc.token || tc.token == "" && m.ProgressToken != nil {
					t.Errorf("%s: ProgressToken = %q, want %q", line, got, tc.token)
				}
			}
		})
	}
	// _meta outside params and progressToken at the top are not looked at.
	m := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","_meta":{"progressToken":1,` + version + `},"progressToken":2}`))
	if m.Kind != KindRequest || m.Modern || m.ProgressToken != nil {
		t.Errorf("top-level _meta used: %+v", m)
	}
}

// A decoded message's strings are its own, but its params (and their
// split) are the line's own bytes: Decode copies no params
// (docs/architecture.md §4.5), so
// the line belongs to the message from then on.
func TestDecodeAliasesLine(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"_meta":{"progressToken":"tok"},"x":1}}` + "\n")
	m := Decode(line)
	params := bytes.Index(line, []byte(`{"_meta"`))
	if len(m.Params) == 0 || &m.Params[0] != &line[params] {
		t.Errorf("Params is a copy of the line's params")
	}
	if x := m.Members.Value("x"); len(x) != 1 || &x[0] != &line[bytes.LastIndexByte(line, '1')] {
		t.Errorf("Members[x] = %q is not the line's", x)
	}
	for i := range line {
		line[i] = 'Z'
	}
	if m.Method != "tools/call" || m.ID != StringID("abc") {
		t.Errorf("the method or id changed with the line: %+v", m)
	}
}

func TestDecodeLongInteger(t *testing.T) {
	// §16 case 15: refused without converting; no timing assertion here.
	digits := strings.Repeat("7", 1500000)
	for _, line := range []string{
		call("1", `{"n":`+digits+`}`),
		call("1", `{"n":-`+digits+`}`),
		call("1", `{"n":`+digits+`.5}`),
		call("1", `{"n":1.`+digits+`e400}`),
	} {
		if m := Decode([]byte(line)); m.Err != ErrParse {
			t.Errorf("%d-byte number line: err %v, want ErrParse", len(line), m.Err)
		}
	}
	if m := Decode([]byte(call("1", `{"n":1.`+digits+`}`))); m.Kind != KindRequest {
		t.Errorf("long fraction: kind %d err %v, want a request", m.Kind, m.Err)
	}
}

// TestDecodeManyMembers covers the switch from linear name comparison to a
// map, at every size around the switch and at 100,000 members.
func TestDecodeManyMembers(t *testing.T) {
	object := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"m","params":{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `}}`)
		return b.String()
	}
	for n := range 3 * linearNames {
		if m := Decode([]byte(object(n, `"last":0`))); m.Kind != KindRequest {
			t.Fatalf("%d unique members: kind %d err %v", n+1, m.Kind, m.Err)
		}
		if n == 0 {
			continue
		}
		for _, dup := range []string{`"k0":0`, fmt.Sprintf(`"k%d":0`, n-1), `"\u006b0":0`, fmt.Sprintf(`"k%d":0`, n/2)} {
			if m := Decode([]byte(object(n, dup))); m.Err != ErrParse {
				t.Fatalf("%d members then %s: err %v, want ErrParse", n, dup, m.Err)
			}
		}
	}
	if m := Decode([]byte(object(100000, `"last":0`))); m.Kind != KindRequest {
		t.Fatalf("100,000 unique members: kind %d err %v", m.Kind, m.Err)
	}
	if m := Decode([]byte(object(100000, `"k99999":0`))); m.Err != ErrParse {
		t.Fatalf("100,000 members then a duplicate: err %v", m.Err)
	}
	// Escaped names that are duplicates only after unescaping, past the switch.
	var b strings.Builder
	b.WriteString("{")
	for i := range 2 * linearNames {
		fmt.Fprintf(&b, `"\u006e%d":1,`, i)
	}
	b.WriteString(`"n3":1}`)
	if m := Decode([]byte(b.String())); m.Err != ErrParse {
		t.Fatalf("escaped duplicate past the map switch: err %v", m.Err)
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		raw string
		id  ID
		ok  bool
	}{
		{`"abc"`, StringID("abc"), true},
		{` "abc" `, StringID("abc"), true},
		{"\t42\r\n", IntID(42), true},
		{`0`, IntID(0), true},
		{`-0`, IntID(0), true},
		{`-9223372036854775808`, IntID(-1 << 63), true},
		{`9223372036854775807`, IntID(1<<63 - 1), true},
		{`9223372036854775808`, ID{}, false},
		{`-9223372036854775809`, ID{}, false},
		{strID(256), StringID(strings.Repeat("x", 256)), true},
		{strID(257), ID{}, false},
		{`"a\"b\u00e9\ud83d\ude00"`, StringID("a\"bé😀"), true},
		{`"\ud800x"`, ID{}, false},
		{`"\ud800\u0041"`, ID{}, false},
		{`"\udfff"`, ID{}, false},
		{`1.5`, ID{}, false},
		{`1e2`, ID{}, false},
		{`1.0`, ID{}, false},
		{`null`, ID{}, false},
		{`true`, ID{}, false},
		{`{}`, ID{}, false},
		{`[]`, ID{}, false},
		{``, ID{}, false},
		{`   `, ID{}, false},
		{`"abc`, ID{}, false},
		{`"a" "b"`, ID{}, false},
		{`01`, ID{}, false},
		{`+1`, ID{}, false},
		{"\"\xFF\"", ID{}, false},
	}
	for _, tc := range tests {
		id, ok := ParseID(json.RawMessage(tc.raw))
		if id != tc.id || ok != tc.ok {
			t.Errorf("ParseID(%.40q) = %v, %v; want %v, %v", tc.raw, id, ok, tc.id, tc.ok)
		}
	}
}

// TestUnescapeMatchesEncodingJSON checks string unescaping against
// encoding/json, surrogate handling included.
func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, content := range []string{
		``, `plain`, `\"\\\/\b\f\n\r\t`, `\u0000\u001f\u007f\u00e9\u65e5`,
		`\ud83d\ude00`, `\ud800`, `\udc00`, `\ud800\ud800`, `\ud800\udc00\udc00`,
		`\ud800x`, `\ud800\n`, `a\ud83dz`, `\uDBFF\uDFFF`, `héllo\u2028`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+content+`"`), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(appendUnescaped(nil, []byte(content))); got != want {
			t.Errorf("unescape %q = %q, encoding/json gives %q", content, got, want)
		}
	}
}

// TestSpecialBytes checks that the lowest mark of specialBytes is the first
// byte needing a look, whatever follows it.
func TestSpecialBytes(t *testing.T) {
	fillers := []byte{'a', 0, '"', '\\', 0x1f, 0x20, 0x80, 0xff}
	for c := range 256 {
		for pos := range 8 {
			for _, after := range fillers {
				word := bytes.Repeat([]byte("a"), 8)
				word[pos] = byte(c)
				for i := pos + 1; i < 8; i++ {
					word[i] = after
				}
				m := specialBytes(binary.LittleEndian.Uint64(word))
				first := 8
				for i, b := range word {
					if b < 0x20 || b >= 0x80 || b == '"' || b == '\\' {
						first = i
						break
					}
				}
				if got := bits.TrailingZeros64(m) / 8; got != first {
					t.Fatalf("word %q: first marked byte %d, want %d", word, got, first)
				}
			}
		}
	}
}

// TestNameSetSwitchesToMap pins the switch that keeps a large object from
// costing quadratic time: past linearNames names the set is a map and the
// shared name stack is released.
func TestNameSetSwitchesToMap(t *testing.T) {
	var text strings.Builder
	for i := range linearNames + 1 {
		fmt.Fprintf(&text, `"n%02d"`, i)
	}
	s := scanner{data: []byte(text.String())}
	n := nameSet{}
	for i := range linearNames + 1 {
		ref := nameRef{start: 5*i + 1, end: 5*i + 4}
		if !s.add(&n, ref, s.name(ref)) {
			t.Fatalf("name %d refused as a duplicate", i)
		}
		if inMap := n.set != nil; inMap != (i == linearNames) {
			t.Fatalf("after %d names: map in use = %v", i+1, inMap)
		}
	}
	if len(s.names) != 0 || len(n.set) != linearNames+1 {
		t.Errorf("after the switch: %d names on the stack, %d in the map", len(s.names), len(n.set))
	}
	if first := (nameRef{start: 1, end: 4}); s.add(&n, first, s.name(first)) {
		t.Error("duplicate of the first name accepted after the switch")
	}
}
