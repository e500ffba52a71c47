package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var stateNow = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

const callParams = `{"name":"needs_choice","arguments":{"b":[1,{"y":2,"x":1}],"a":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`

// mutations returns every string obtained by changing one character of s
// to another character of the base64url alphabet, or inserting a line
// break.
func mutations(s string) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var out []string
	for i := range len(s) {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, s[i])+1)%64], alphabet[(strings.IndexByte(alphabet, s[i])+33)%64], '='} {
			out = append(out, s[:i]+string(c)+s[i+1:])
		}
		out = append(out, s[:i]+"\n"+s[i:])
	}
	return append(out, s+"=", s+"A", s[:len(s)-1], "")
}

func TestStateValid(t *testing.T) {
	s := newSigner()
	state := s.state("tools/call", json.RawMessage(callParams), stateNow)
	if state == "" || strings.ContainsAny(state, "+/=") {
		t.Fatalf("state %q is not unpadded base64url", state)
	}
	valid := []struct {
		name   string
		params string
		now    time.Time
	}{
		{"same params", callParams, stateNow},
		{"retry members and _meta differ",
			`{"name":"needs_choice","arguments":{"b":[1,{"y":2,"x":1}],"a":"x"},"inputResponses":{"choice":{"action":"accept"}},"requestState":"` + state + `","_meta":{"progressToken":1}}`,
			stateNow},
		{"member order differs at every depth", `{"arguments":{"a":"x","b":[1,{"x":1,"y":2}]},"name":"needs_choice"}`, stateNow},
		{"whitespace and escapes differ", "{ \"name\" : \"needs\\u005fchoice\",\n\"arguments\":{\"a\":\"x\",\"b\":[ 1, {\"x\":1,\"y\":2} ]}}", stateNow},
		{"almost expired", callParams, stateNow.Add(10*time.Minute - time.Millisecond)},
	}
	for _, tt := range valid {
		if !s.checkState(state, "tools/call", json.RawMessage(tt.params), tt.now) {
			t.Errorf("%s: refused", tt.name)
		}
	}
}

func TestStateInvalid(t *testing.T) {
	s := newSigner()
	state := s.state("tools/call", json.RawMessage(callParams), stateNow)
	invalid := []struct {
		name, state, method, params string
		now                         time.Time
	}{
		{"other method", state, "prompts/get", callParams, stateNow},
		{"argument changed", state, "tools/call", strings.Replace(callParams, `"a":"x"`, `"a":"y"`, 1), stateNow},
		{"number written differently", state, "tools/call", strings.Replace(callParams, `[1,`, `[1.0,`, 1), stateNow},
		{"member added", state, "tools/call", strings.Replace(callParams, `{"name"`, `{"extra":1,"name"`, 1), stateNow},
		{"member removed", state, "tools/call", `{"name":"needs_choice"}`, stateNow},
		{"list reordered", state, "tools/call", strings.Replace(callParams, `[1,{"y":2,"x":1}]`, `[{"y":2,"x":1},1]`, 1), stateNow},
		{"expired", state, "tools/call", callParams, stateNow.Add(10*time.Minute + time.Millisecond)},
		{"long expired", state, "tools/call", callParams, stateNow.Add(24 * time.Hour)},
		{"another process", newSigner().state("tools/call", json.RawMessage(callParams), stateNow), "tools/call", callParams, stateNow},
		{"garbage", "not-a-state", "tools/call", callParams, stateNow},
		{"a cursor", s.cursor("tools/call", "2026-07-28", listRev{}, 100, 0), "tools/call", callParams, stateNow},
	}
	for _, tt := range invalid {
		if s.checkState(tt.state, tt.method, json.RawMessage(tt.params), tt.now) {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	for _, m := range mutations(state) {
		if s.checkState(m, "tools/call", json.RawMessage(callParams), stateNow) {
			t.Fatalf("one character changed: %q accepted (issued %q)", m, state)
		}
	}
}

func TestStateAbsentParams(t *testing.T) {
	s := newSigner()
	state := s.state("resources/read", nil, stateNow)
	for _, p := range []string{``, `{}`, `{"_meta":{"a":1}}`, `{"requestState":"x","inputResponses":{}}`} {
		if !s.checkState(state, "resources/read", json.RawMessage(p), stateNow) {
			t.Errorf("params %q refused", p)
		}
	}
	if s.checkState(state, "resources/read", json.RawMessage(`{"uri":"test://x"}`), stateNow) {
		t.Error("other params accepted")
	}
}

// rev7 is a list revision for the cursor tests.
var rev7 = listRev{revision: 7, fingerprint: 1}

func TestCursorRoundTrip(t *testing.T) {
	s := newSigner()
	for _, offset := range []int{0, 1, 100, 200, 1 << 40} {
		c := s.cursor("tools/list", "2026-07-28", rev7, 100, offset)
		if c == "" {
			t.Fatal("empty cursor")
		}
		got, ok := s.parseCursor(json.RawMessage(fmt.Sprintf("%q", c)), "tools/list", "2026-07-28", rev7, 100)
		if !ok || got != offset {
			t.Fatalf("offset %d: parsed %d, %v", offset, got, ok)
		}
	}
}

func TestCursorInvalid(t *testing.T) {
	s := newSigner()
	c := s.cursor("tools/list", "2026-07-28", rev7, 100, 100)
	quoted := json.RawMessage(fmt.Sprintf("%q", c))
	tests := []struct {
		name     string
		cursor   string
		method   string
		version  string
		rev      listRev
		pageSize int
	}{
		{"garbage", `"next-page"`, "tools/list", "2026-07-28", rev7, 100},
		{"empty", `""`, "tools/list", "2026-07-28", rev7, 100},
		{"another list", string(quoted), "prompts/list", "2026-07-28", rev7, 100},
		{"another version", string(quoted), "tools/list", "2025-11-25", rev7, 100},
		{"catalog changed", string(quoted), "tools/list", "2026-07-28", listRev{revision: 8, fingerprint: rev7.fingerprint}, 100},
		{"list changed", string(quoted), "tools/list", "2026-07-28", listRev{revision: 7, fingerprint: 2}, 100},
		{"another page size", string(quoted), "tools/list", "2026-07-28", rev7, 50},
		{"another process", fmt.Sprintf("%q", newSigner().cursor("tools/list", "2026-07-28", rev7, 100, 100)), "tools/list", "2026-07-28", rev7, 100},
		{"a request state", fmt.Sprintf("%q", s.state("tools/list", nil, stateNow)), "tools/list", "2026-07-28", rev7, 100},
		{"a number", `100`, "tools/list", "2026-07-28", rev7, 100},
		{"null", `null`, "tools/list", "2026-07-28", rev7, 100},
		{"an object", `{"offset":100}`, "tools/list", "2026-07-28", rev7, 100},
		{"a list", `["` + c + `"]`, "tools/list", "2026-07-28", rev7, 100},
		{"true", `true`, "tools/list", "2026-07-28", rev7, 100},
		{"nothing", ``, "tools/list", "2026-07-28", rev7, 100},
	}
	for _, tt := range tests {
		if off, ok := s.parseCursor(json.RawMessage(tt.cursor), tt.method, tt.version, tt.rev, tt.pageSize); ok {
			t.Errorf("%s: accepted with offset %d", tt.name, off)
		}
	}
	for _, m := range mutations(c) {
		if _, ok := s.parseCursor(json.RawMessage(fmt.Sprintf("%q", m)), "tools/list", "2026-07-28", rev7, 100); ok {
			t.Fatalf("one character changed: %q accepted (issued %q)", m, c)
		}
	}
}

// A cursor of another process sharing the key (a node behind the same
// load balancer, server.state_key_file) cannot know this process's
// revision: it is valid while the list's keys are the same.
func TestCursorAcrossNodes(t *testing.T) {
	key := []byte(strings.Repeat("k", MinStateKeyBytes))
	a, b := signerFor(key), signerFor(key)
	c := fmt.Sprintf("%q", a.cursor("tools/list", "2026-07-28", listRev{revision: 3, fingerprint: 42}, 100, 100))
	if off, ok := b.parseCursor(json.RawMessage(c), "tools/list", "2026-07-28", listRev{revision: 9, fingerprint: 42}, 100); !ok || off != 100 {
		t.Errorf("another node, the same list: %d, %v", off, ok)
	}
	if _, ok := b.parseCursor(json.RawMessage(c), "tools/list", "2026-07-28", listRev{revision: 3, fingerprint: 43}, 100); ok {
		t.Error("another node, another list: accepted")
	}
	if _, ok := a.parseCursor(json.RawMessage(c), "tools/list", "2026-07-28", listRev{revision: 4, fingerprint: 42}, 100); ok {
		t.Error("the issuing node after a catalog change, the same keys: accepted")
	}
	if _, ok := signerFor([]byte(strings.Repeat("x", MinStateKeyBytes))).parseCursor(json.RawMessage(c), "tools/list", "2026-07-28", listRev{revision: 3, fingerprint: 42}, 100); ok {
		t.Error("another key: accepted")
	}
}

func TestCursorPage(t *testing.T) {
	items := make([]int, 250)
	for i := range items {
		items[i] = i
	}
	tests := []struct {
		offset, size, first, n, next int
		more                         bool
	}{
		{0, 100, 0, 100, 100, true},
		{100, 100, 100, 100, 200, true},
		{200, 100, 200, 50, 250, false},
		{150, 100, 150, 100, 250, false},
		{250, 100, 0, 0, 250, false},
		{300, 100, 0, 0, 250, false},
		{0, 300, 0, 250, 250, false},
	}
	for _, tt := range tests {
		out, next, more := page(items, tt.offset, tt.size)
		if len(out) != tt.n || next != tt.next || more != tt.more || (tt.n > 0 && out[0] != tt.first) {
			t.Errorf("page(%d, %d) = %d items from %v, next %d, more %v", tt.offset, tt.size, len(out), out[:min(len(out), 1)], next, more)
		}
		if cap(out) != len(out) {
			t.Errorf("page(%d, %d) leaves room to append into items", tt.offset, tt.size)
		}
	}
	if out, next, more := page([]string(nil), 0, 100); len(out) != 0 || next != 0 || more {
		t.Errorf("empty list: %v %d %v", out, next, more)
	}
	// Walking all pages visits each item once.
	var seen []int
	for off, more := 0, true; more; {
		var out []int
		out, off, more = page(items, off, 100)
		seen = append(seen, out...)
	}
	if !slices.Equal(seen, items) {
		t.Errorf("walk visited %d items", len(seen))
	}
}

// state returns a requestState without carried answers, valid until now
// plus 10 minutes.
func (s *signer) state(method string, params json.RawMessage, now time.Time) string {
	return s.stateWith(method, params, nil, now)
}

func (s *signer) checkState(state, method string, params json.RawMessage, now time.Time) bool {
	_, ok := s.openState(state, method, params, now)
	return ok
}
