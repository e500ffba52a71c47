package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The decoder's Split is what SplitParams makes of the same params: the
// members of params and of an object _meta, in order, names unescaped,
// values as sent; nested objects and a _meta outside params are not split.
func TestDecodeSplit(t *testing.T) {
	for _, params := range []string{
		`{}`,
		`{"name":"echo","arguments":{"text":"hi","_meta":{"x":1}}}`,
		`{"a":1,"_meta":{}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7},"z":[1,{"_meta":2}]}`,
		`{"\u005fmeta":{"\u0070rogressToken":"t"},"n\"q":null}`,
		`{"_meta":null,"b":true}`,
		`{"_meta":[1],"c":"x"}`,
		` { "s" : "a b" , "_meta" : { "k" : { } } } `,
	} {
		line := `{"jsonrpc":"2.0","id":1,"method":"m","params":` + params + `}`
		m := Decode([]byte(line))
		if m.Kind != KindRequest {
			t.Fatalf("%s: kind %d, err %v", line, m.Kind, m.Err)
		}
		want, ok := SplitParams(json.RawMessage(params))
		if !ok {
			t.Fatalf("SplitParams(%s) refused it", params)
		}
		if !reflect.DeepEqual(m.Split, want) {
			t.Errorf("params %s: Decode split %+v, SplitParams %+v", params, m.Split, want)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(params), &members); err != nil {
			t.Fatal(err)
		}
		if got := m.Members.Map(); !reflect.DeepEqual(got, nilIfEmpty(members)) {
			t.Errorf("params %s: members %q, want %q", params, got, members)
		}
		if string(m.ProgressToken) != string(m.Meta.Value("progressToken")) {
			t.Errorf("params %s: ProgressToken %q is not _meta's", params, m.ProgressToken)
		}
	}
	// A notification's params are split too (a cancellation reads them).
	m := Decode([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"r"}}`))
	if m.Kind != KindNotification || string(m.Members.Value("requestId")) != "3" || m.Members.Value("reason") == nil {
		t.Errorf("notification split: %+v", m.Split)
	}
}

func nilIfEmpty(m map[string]json.RawMessage) map[string]json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

func TestObjectGet(t *testing.T) {
	o, ok := SplitObject(nil, json.RawMessage(`{"a":1,"b":"x","c":null}`))
	if !ok || len(o) != 3 {
		t.Fatalf("SplitObject: %v %v", o, ok)
	}
	if v, ok := o.Get("c"); !ok || string(v) != "null" {
		t.Errorf(`Get("c") = %q, %v`, v, ok)
	}
	if v, ok := o.Get("d"); ok || v != nil {
		t.Errorf(`Get("d") = %q, %v`, v, ok)
	}
	if !o.Has("a") || o.Has("A") || string(o.Value("b")) != `"x"` || o.Value("zz") != nil {
		t.Errorf("Has/Value disagree with the members %v", o)
	}
	// SplitObject appends to what it is given, and leaves it as it was on
	// failure.
	buf := Object{{Name: "kept"}}
	if got, ok := SplitObject(buf, json.RawMessage(`{"a":}`)); ok || len(got) != 1 {
		t.Errorf("a failed split changed its buffer: %v", got)
	}
	if got, ok := SplitObject(buf, json.RawMessage(`{"a":2}`)); !ok || len(got) != 2 || got[1].Name != "a" {
		t.Errorf("split appended %v", got)
	}
}
