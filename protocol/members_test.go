package protocol

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

// Members agrees with encoding/json on every object it accepts, and refuses
// what is not an object.
func TestMembers(t *testing.T) {
	cases := []struct {
		raw string
		ok  bool
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"a":1}`, true},
		{`{"a":1,"b":"x,}]","c":[1,{"d":"}"}],"e":{"f":null},"g":true,"h":-1.5e3}`, true},
		{`{"\u0061":"\"}","b\\c":"\\"}`, true},
		{"{\n\"a\" : [ ] ,\t\"b\" :{}\r}", true},
		{`{"name":"日本","x":"a\u2028b"}`, true},
		{``, false},
		{`null`, false},
		{`[]`, false},
		{`"x"`, false},
		{`{"a"}`, false},
		{`{"a":}`, false},
		{`{"a":1,}`, false},
		{`{"a":1} x`, false},
		{`{"a":[1,2}`, false},
		{`{"a":"unterminated}`, false},
		{`{a:1}`, false},
	}
	for _, c := range cases {
		got, ok := Members(json.RawMessage(c.raw))
		if ok != c.ok {
			t.Errorf("Members(%q) ok = %v, want %v", c.raw, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.raw), &want); err != nil {
			t.Fatalf("%q: %v", c.raw, err)
		}
		if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Errorf("Members(%q) = %q, want %q", c.raw, got, want)
		}
	}
}

func BenchmarkMembers(b *testing.B) {
	raw := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	b.ReportAllocs()
	for b.Loop() {
		Members(raw)
	}
}

// FuzzMembers checks Members against encoding/json on whatever the fuzzer
// finds: on a valid object both agree, and Members never panics.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":"}","b":[{"c":"]"}]}`, `{"\u0061":1}`, `[1]`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Members(raw)
		var want map[string]json.RawMessage
		// encoding/json rewrites invalid UTF-8 in names; Members sees only
		// lines the decoder checked, which never hold any.
		if !utf8.Valid(raw) || json.Unmarshal(raw, &want) != nil || want == nil {
			return
		}
		if !ok {
			t.Fatalf("Members(%q) refused a valid object", raw)
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("Members(%q)[%q] = %q, want %q", raw, k, got[k], v)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("Members(%q) has %d members, want %d", raw, len(got), len(want))
		}
	})
}

// An empty object is split without allocating: every 2026 request carries
// one or more (clientCapabilities is often {}).
func TestMembersEmptyObjectAllocatesNothing(t *testing.T) {
	raw := json.RawMessage(` { } `)
	if n := testing.AllocsPerRun(100, func() {
		if m, ok := Members(raw); !ok || len(m) != 0 {
			t.Fatalf("Members(%s) = %v, %v", raw, m, ok)
		}
	}); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}

func TestEachMember(t *testing.T) {
	var got []string
	ok := EachMember(json.RawMessage(` { "a" : 1, "b\"c":{"x":[1,"}"]} ,"d":"e" } `), func(name, value json.RawMessage) bool {
		got = append(got, string(name)+"="+string(value))
		return true
	})
	want := []string{`"a"=1`, `"b\"c"={"x":[1,"}"]}`, `"d"="e"`}
	if !ok || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("EachMember = %v %q, want true %q", ok, got, want)
	}
	for _, bad := range []string{``, `[]`, `{"a":}`, `{"a":1`, `{"a":1}x`, `null`} {
		if EachMember(json.RawMessage(bad), func(_, _ json.RawMessage) bool { return true }) {
			t.Errorf("EachMember(%q) accepted", bad)
		}
	}
	n := 0
	EachMember(json.RawMessage(`{"a":1,"b":2}`), func(_, _ json.RawMessage) bool { n++; return false })
	if n != 1 {
		t.Errorf("EachMember went on after false: %d calls", n)
	}
}

func TestSetMember(t *testing.T) {
	for _, tc := range []struct{ obj, name, value, want string }{
		{`{"a":1,"b":2}`, "a", `3`, `{"b":2,"a":3}`},
		{`{"a":1,"b":2}`, "a", ``, `{"b":2}`},
		{`{"a":1}`, "a", ``, `{}`},
		{``, "x", `"y"`, `{"x":"y"}`},
		{`[1]`, "x", `1`, `{"x":1}`},
		{`{"x\u0031":1}`, "x1", `2`, `{"x\u0031":1,"x1":2}`},
	} {
		var obj, value json.RawMessage
		if tc.obj != "" {
			obj = json.RawMessage(tc.obj)
		}
		if tc.value != "" {
			value = json.RawMessage(tc.value)
		}
		if got := string(SetMember(obj, tc.name, value)); got != tc.want {
			t.Errorf("SetMember(%s, %q, %s) = %s, want %s", tc.obj, tc.name, tc.value, got, tc.want)
		}
	}
}
