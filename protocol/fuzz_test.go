package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode checks that Decode never panics, that it never accepts what
// encoding/json rejects, that what it hands on is valid JSON, that the
// method and id it extracts agree with encoding/json, and that
// DecodeFromServer judges the line as it does.
func FuzzDecode(f *testing.F) {
	for _, tc := range decodeCases {
		if len(tc.line) < 4096 {
			f.Add([]byte(tc.line))
		}
	}
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"x"}}}`,
		`{"jsonrpc":"2.0","id":"\ud800\u00e9","method":"\u0074ools/list"}`,
		`{"method":"notifications/cancelled","params":{"requestId":1,"reason":"r"}}`,
		`{"a":{"b":[1,2.5e-3,{"c":null}]},"d":"\\\"","e":true,"f":false}`,
		"\xEF\xBB\xBF{}\r\n",
		"[" + strings.Repeat(`"abcdefgh",`, 20) + "1]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		input := bytes.Clone(line)
		m := Decode(line)
		if !bytes.Equal(line, input) {
			t.Fatal("Decode modified its input")
		}
		if c := DecodeFromServer(line); c.Kind != m.Kind || c.ID != m.ID || c.Err != m.Err || c.Method != m.Method ||
			!bytes.Equal(c.Params, m.Params) || !bytes.Equal(c.Result, m.Result) || !bytes.Equal(c.ErrorObject, m.ErrorObject) {
			t.Fatalf("DecodeFromServer(%q) = %+v, Decode gives %+v", line, c, m)
		}
		text := bytes.TrimSuffix(line, []byte("\n"))
		text = bytes.TrimPrefix(text, []byte("\xEF\xBB\xBF"))
		switch {
		case m.Kind == KindBlank:
			if len(bytes.Trim(text, " \t\r\n")) != 0 {
				t.Fatalf("non-blank line %q decoded as blank", line)
			}
			return
		case m.Err == ErrParse:
			return
		}
		if !json.Valid(text) {
			t.Fatalf("Decode accepted invalid JSON %q as kind %d err %v", line, m.Kind, m.Err)
		}
		if m.Params != nil && !json.Valid(m.Params) {
			t.Fatalf("invalid Params %q", m.Params)
		}
		if m.ProgressToken != nil && !json.Valid(m.ProgressToken) {
			t.Fatalf("invalid ProgressToken %q", m.ProgressToken)
		}
		if m.Kind != KindRequest && m.Kind != KindNotification {
			return
		}
		var envelope map[string]json.RawMessage
		if err := json.Unmarshal(text, &envelope); err != nil {
			t.Fatalf("encoding/json cannot decode an accepted envelope %q: %v", line, err)
		}
		var method string
		if err := json.Unmarshal(envelope["method"], &method); err != nil || method != m.Method {
			t.Fatalf("Method %q, encoding/json reads %q (%v)", m.Method, method, err)
		}
		if m.Kind == KindRequest {
			if id, ok := ParseID(envelope["id"]); !ok || id != m.ID {
				t.Fatalf("ID %v, ParseID of the raw id gives %v, %v", m.ID, id, ok)
			}
		}
	})
}

// FuzzParseID checks ParseID against encoding/json's reading of the same text.
func FuzzParseID(f *testing.F) {
	for _, seed := range []string{`"abc"`, `42`, `-0`, `1.5`, `"\ud800"`, `"\ud83d\ude00"`, `"\ufffd\udc00"`, `"\\ud800"`, `9223372036854775808`, ` 7 `, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, ok := ParseID(raw)
		if !ok {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("ParseID accepted invalid JSON %q", raw)
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		var want ID
		switch v := v.(type) {
		case string:
			// A lone surrogate is refused, never read as U+FFFD: a U+FFFD
			// in an accepted id was sent as one.
			if strings.ContainsRune(v, utf8.RuneError) && !bytes.Contains(raw, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
				t.Fatalf("ParseID(%q) accepted an id holding a lone surrogate, read as %q", raw, v)
			}
			want = StringID(v)
		case json.Number:
			n, err := strconv.ParseInt(v.String(), 10, 64)
			if err != nil {
				t.Fatalf("ParseID(%q) = %v, encoding/json reads %v: %v", raw, id, v, err)
			}
			want = IntID(n)
		}
		if id != want {
			t.Fatalf("ParseID(%q) = %v, encoding/json reads %v", raw, id, want)
		}
	})
}
