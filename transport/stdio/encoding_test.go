package stdio_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// Case 49: compact, envelope members in order, one line.
func TestResultBytes(t *testing.T) {
	h := start(t, pipes)
	h.send(call(1, "echo", `{"text":"plain"}`))
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"plain","type":"text"}],"isError":false}}`)
	h.finish()
}

// Cases 50 and 51: raw UTF-8, U+2028/U+2029 escaped, HTML characters not.
func TestEncodingRules(t *testing.T) {
	h := start(t, pipes)
	text := "héllo 日本 😀 a\u2028b\u2029c <a&b>/"
	args, _ := json.Marshal(map[string]string{"text": text})
	h.send(call(1, "echo", string(args)))
	l := h.line()
	for _, raw := range []string{"\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80", `a\u2028b\u2029c`, `<a&b>/`} {
		if !strings.Contains(l, raw) {
			t.Errorf("output lacks %q: %s", raw, l)
		}
	}
	if strings.ContainsAny(l, "\u2028\u2029") {
		t.Error("raw U+2028 or U+2029 in output")
	}
	if got := resultText(t, l); got != text {
		t.Errorf("round trip: %q", got)
	}
	h.finish()
}

// A 1,000,000-byte result crosses intact as one line.
func TestLargeResult(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.send(call(1, "big", `{"bytes":1000000}`))
		if got := resultText(t, h.line()); len(got) != 1_000_000 {
			t.Fatalf("got %d bytes", len(got))
		}
		h.finish()
	})
}

// TestLargeSplicedResult: a large text that needs no escaping, which a
// worker writes from the string itself (protocol.Splices), arrives whole
// on every device, the frame AppendResult would write, beside smaller
// answers written at the same time, each whole.
func TestLargeSplicedResult(t *testing.T) {
	sizes := map[int]int{1: 10, 2: 1_000_000, 3: protocol.SpliceMin}
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		for id := 1; id <= 3; id++ {
			h.send(call(id, "plain", fmt.Sprintf(`{"bytes":%d}`, sizes[id])))
		}
		seen := map[int]bool{}
		for range sizes {
			line := h.line()
			raw, _, _ := strings.Cut(strings.TrimPrefix(line, `{"jsonrpc":"2.0","id":`), ",")
			id, _ := strconv.Atoi(raw)
			n, ok := sizes[id]
			if !ok || seen[id] {
				t.Fatalf("an answer to id %s: %.100s", raw, line)
			}
			seen[id] = true
			want, err := protocol.AppendResult(nil, protocol.IntID(int64(id)), text(strings.Repeat("x", n)))
			if err != nil {
				t.Fatal(err)
			}
			if line+"\n" != string(want) {
				t.Fatalf("answer %d differs from AppendResult's frame (%d bytes, want %d)", id, len(line)+1, len(want))
			}
		}
		h.finish()
	})
}
