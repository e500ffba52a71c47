package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

type failingMarshaler struct{}

func (failingMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

type panickingMarshaler struct{}

func (panickingMarshaler) MarshalJSON() ([]byte, error) { panic("boom") }

type rawMarshaler string

func (r rawMarshaler) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestAppendResult(t *testing.T) {
	tests := []struct {
		name   string
		id     ID
		result any
		want   string
	}{
		{"object", IntID(1), map[string]any{"b": 1, "a": []int{1, 2}}, `{"jsonrpc":"2.0","id":1,"result":{"a":[1,2],"b":1}}`},
		{"string id", StringID("abc"), struct{}{}, `{"jsonrpc":"2.0","id":"abc","result":{}}`},
		{"zero id", IntID(0), true, `{"jsonrpc":"2.0","id":0,"result":true}`},
		{"null id", ID{}, "x", `{"jsonrpc":"2.0","id":null,"result":"x"}`},
		{"min id", IntID(math.MinInt64), 1, `{"jsonrpc":"2.0","id":-9223372036854775808,"result":1}`},
		{"escaped id", StringID("a\"b\\c\n\u2028é"), 1, `{"jsonrpc":"2.0","id":"a\"b\\c\n\u2028é","result":1}`},
		{"nil result", IntID(1), nil, `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"raw compacted", IntID(1), json.RawMessage(" { \"a\" : [ 1 , 2 ] }\n"), `{"jsonrpc":"2.0","id":1,"result":{"a":[1,2]}}`},
		{"html unescaped", IntID(1), map[string]string{"t": "<a&b>/"}, `{"jsonrpc":"2.0","id":1,"result":{"t":"<a&b>/"}}`},
		{"raw html unescaped", IntID(1), json.RawMessage(`"<a&b>/"`), `{"jsonrpc":"2.0","id":1,"result":"<a&b>/"}`},
		{"invalid UTF-8", IntID(1), "a\xffb", `{"jsonrpc":"2.0","id":1,"result":"a\ufffdb"}`},
		{"raw separators", IntID(1), json.RawMessage("[\"a\u2028b\u2029\"]"), `{"jsonrpc":"2.0","id":1,"result":["a\u2028b\u2029"]}`},
		{"raw invalid UTF-8", IntID(1), json.RawMessage("{\"\xff\":\"x\xe6\x97\"}"), `{"jsonrpc":"2.0","id":1,"result":{"\ufffd":"x\ufffd\ufffd"}}`},
		{"marshaler invalid UTF-8", IntID(1), rawMarshaler("\"\xc3\u2029\""), `{"jsonrpc":"2.0","id":1,"result":"\ufffd\u2029"}`},
		{"control characters", IntID(1), "\x00\x1f\t\x7f", `{"jsonrpc":"2.0","id":1,"result":"\u0000\u001f\t` + "\x7f" + `"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendResult([]byte("prev\n"), tc.id, tc.result)
			if err != nil {
				t.Fatal(err)
			}
			if want := "prev\n" + tc.want + "\n"; string(got) != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestAppendResultUnencodable(t *testing.T) {
	for name, result := range map[string]any{
		"NaN":               math.NaN(),
		"Inf":               math.Inf(-1),
		"nested NaN":        map[string]any{"a": []any{1, math.NaN()}},
		"channel":           make(chan int),
		"function":          func() {},
		"failing marshaler": failingMarshaler{},
		"panicking":         []any{panickingMarshaler{}},
		"invalid raw":       json.RawMessage(`{"a":`),
		"empty raw":         json.RawMessage(` `),
		"raw trailing":      json.RawMessage(`1 2`),
	} {
		t.Run(name, func(t *testing.T) {
			dst := make([]byte, 5, 64)
			copy(dst, "prev\n")
			got, err := AppendResult(dst, IntID(1), result)
			if err == nil {
				t.Fatalf("no error; wrote %q", got)
			}
			if string(got) != "prev\n" {
				t.Errorf("dst changed to %q", got)
			}
		})
	}
}

func TestAppendError(t *testing.T) {
	tests := []struct {
		name string
		id   ID
		err  *Error
		want string
	}{
		{"parse", ID{}, ErrParse, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"not 2.0", IntID(7), ErrNotJSONRPC2, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Expected a JSON-RPC 2.0 request"}}`},
		{"string id", StringID("c"), ErrCapacity, `{"jsonrpc":"2.0","id":"c","error":{"code":-32603,"message":"Server execution capacity exhausted"}}`},
		{"line limit", ID{}, LineLimitError(2000000), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Message exceeds the 2000000-byte line limit"}}`},
		{"data", IntID(2), &Error{Code: -32602, Message: "bad", Data: map[string]string{"field": "x"}}, `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad","data":{"field":"x"}}}`},
		{"data null raw", IntID(2), &Error{Code: 1, Message: "m", Data: json.RawMessage("null")}, `{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m","data":null}}`},
		{"data unencodable", IntID(2), &Error{Code: 1, Message: "m", Data: math.Inf(1)}, `{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`},
		{"data panics", IntID(2), &Error{Code: 1, Message: "m", Data: panickingMarshaler{}}, `{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`},
		{"message escaped", IntID(2), &Error{Code: 1, Message: "\"<q>\"\n\xff"}, `{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"\"<q>\"\n\ufffd"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendError([]byte("prev\n"), tc.id, tc.err)); got != "prev\n"+tc.want+"\n" {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestAppendNotification(t *testing.T) {
	got, err := AppendNotification(nil, "notifications/progress", map[string]any{"progressToken": "t", "progress": 0.5})
	if want := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5,"progressToken":"t"}}` + "\n"; err != nil || string(got) != want {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
	got, err = AppendNotification([]byte("x"), "notifications/tools/list_changed", nil)
	if want := `x{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n"; err != nil || string(got) != want {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
	got, err = AppendNotification([]byte("x"), "m", map[string]float64{"p": math.NaN()})
	if err == nil || string(got) != "x" {
		t.Errorf("NaN params: got %q, %v; want x and an error", got, err)
	}
}

// TestEncodeUnicode is docs/transport.md §16 cases 50 and 51.
func TestEncodeUnicode(t *testing.T) {
	text := "héllo 日本 😀 a\u2028b\u2029c <a&b>/"
	line, err := AppendResult(nil, StringID("u"), map[string]string{"text": text})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80", `a\u2028b\u2029c`, `<a&b>/`} {
		if !bytes.Contains(line, []byte(raw)) {
			t.Errorf("%s lacks %q", line, raw)
		}
	}
	if bytes.Contains(line, []byte("\u2028")) || bytes.Contains(line, []byte("\u2029")) {
		t.Errorf("%s holds a raw line separator", line)
	}
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 || !utf8.Valid(line) {
		t.Errorf("not one valid line: %q", line)
	}
	var back struct{ Result struct{ Text string } }
	if err := json.Unmarshal(line, &back); err != nil || back.Result.Text != text {
		t.Errorf("round trip gave %q, %v", back.Result.Text, err)
	}
	if m := Decode(line); m.Kind != KindResponse {
		t.Errorf("Decode of our own result: kind %d err %v", m.Kind, m.Err)
	}
}

// TestAppendStringMatchesEncodingJSON pins appendString (used for ids,
// methods and messages) to what the encoder writes for the same string.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	inputs := []string{"", "plain", "héllo 日本 😀", "\u2028\u2029", "<a&b>/", "\xff", "a\xe6\x97", "\xed\xa0\x80", "\ufffd"}
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
		inputs = append(inputs, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	inputs = append(inputs, all.String())
	for _, s := range inputs {
		want, err := AppendResult(nil, ID{}, s)
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(bytes.TrimPrefix(want, []byte(`{"jsonrpc":"2.0","id":null,"result":`)), []byte("}\n"))
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	}
}

func TestAppendDoesNotAllocateForErrors(t *testing.T) {
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendError(buf[:0], StringID("request-1"), ErrTimedOut)
	})
	if allocs != 0 {
		t.Errorf("AppendError allocates %v times", allocs)
	}
}

// TestAppendRequest pins the frame of a request snodod sends to its client
// (docs/protocol.md §3.1): envelope members in order, and params left out when
// nil or refused whole when they cannot be encoded.
func TestAppendRequest(t *testing.T) {
	line, err := AppendRequest([]byte("x"), StringID("snodod:1"), "roots/list", struct{}{})
	if err != nil || string(line) != `x{"jsonrpc":"2.0","id":"snodod:1","method":"roots/list","params":{}}`+"\n" {
		t.Errorf("AppendRequest = %q, %v", line, err)
	}
	if line, _ = AppendRequest(nil, StringID("snodod:2"), "ping", nil); string(line) != `{"jsonrpc":"2.0","id":"snodod:2","method":"ping"}`+"\n" {
		t.Errorf("without params: %q", line)
	}
	if m := Decode(line); m.Kind != KindRequest || m.ID != StringID("snodod:2") || m.Method != "ping" {
		t.Errorf("Decode of our own request: %+v", m)
	}
	if line, err = AppendRequest([]byte("x"), StringID("snodod:3"), "m", math.NaN()); err == nil || string(line) != "x" {
		t.Errorf("unencodable params: %q, %v", line, err)
	}
}
