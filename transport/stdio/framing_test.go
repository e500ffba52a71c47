package stdio_test

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Case 1: empty input gives no output and returns ok, every time.
func TestEmptyInput(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		for range 100 {
			h := start(t, open)
			h.finish()
		}
	})
}

// Case 2: CRLF framing.
func TestCRLF(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.write(call("a", "echo", `{"text":"one"}`) + "\r\n" + call("b", "echo", `{"text":"two"}`) + "\r\n")
		got := map[string]string{}
		for range 2 {
			l := h.line()
			got[string(parse(t, l).ID)] = resultText(t, l)
		}
		if got[`"a"`] != "one" || got[`"b"`] != "two" {
			t.Fatalf("got %v", got)
		}
		h.finish()
	})
}

// Cases 3 and 4: blank lines are ignored; a BOM is stripped.
func TestBlankLinesAndBOM(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.write("\n   \t\r\n\r\n\xEF\xBB\xBF\n")
		h.send(req(1, "tools/list", `{}`))
		if id := string(parse(t, h.line()).ID); id != "1" {
			t.Fatalf("id %s", id)
		}
		h.write("\xEF\xBB\xBF" + req(2, "tools/list", `{}`) + "\n")
		if id := string(parse(t, h.line()).ID); id != "2" {
			t.Fatalf("id %s", id)
		}
		h.finish()
	})
}

// Cases 5 and 10: the line limit counts the newline; an unterminated final
// line counts none.
func TestLineLimitBoundary(t *testing.T) {
	invalid := errLine("null", -32600, "Invalid Request")
	tooLong := errLine("null", -32600, "Message exceeds the 10-byte line limit")
	cases := []struct {
		name  string
		input string
		want  []string
	}{
		{"10 bytes with newline", "123456789\n", []string{invalid}},
		{"11 bytes with newline", "1234567890\n", []string{tooLong}},
		{"10 bytes at EOF", "1234567890", []string{invalid}},
		{"11 bytes at EOF", "12345678901", []string{tooLong}},
		{"14 bytes at EOF", "12345678901234", []string{tooLong}},
		{"refused then served", "1234567890\n123456789\n", []string{tooLong, invalid}},
		{"long line then served", "123456789012345678901234567890\n1\n", []string{tooLong, invalid}},
	}
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h := start(t, open, withLimit(10))
				h.write(c.input)
				h.closeInput()
				for _, w := range c.want {
					h.expect(w)
				}
				h.finish()
			})
		}
	})
}

// Case 6: a refused line is answered once, the rest discarded, the next
// line served, and no parse error is written for the refused bytes.
func TestRefuseOnceThenServe(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open, withLimit(200))
		h.write(strings.Repeat("x", 250))
		h.expect(errLine("null", -32600, "Message exceeds the 200-byte line limit"))
		h.write(strings.Repeat("x", 50))
		h.write("x\n")
		h.send(req(1, "tools/list", `{}`))
		if id := string(parse(t, h.line()).ID); id != "1" {
			t.Fatalf("id %s", id)
		}
		h.finish()
	})
}

// Case 7: chunk boundaries never change the result.
func TestSplitReads(t *testing.T) {
	want := errLine("null", -32600, "Expected a JSON-RPC 2.0 request")
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		for _, writes := range [][]string{
			{`{"a":`, "1}\r\n{\"b\"", ":2}\n\n"},
			{"{\"a\":1}\r\n{\"b\":2}\n\n"},
		} {
			h := start(t, open)
			for _, w := range writes {
				h.write(w)
				time.Sleep(10 * time.Millisecond) // separate reads
			}
			h.expect(want)
			h.expect(want)
			h.finish()
		}
	})
}

// Case 8: a line that never ends is refused before any newline arrives, and
// the reader's memory stays bounded by the limit, not by the peer.
func TestRefusalBeforeNewline(t *testing.T) {
	const limit = 1_000_000
	h := start(t, pipes, withLimit(limit))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	written := make(chan error, 1)
	go func() {
		chunk := strings.Repeat("x", 1<<20)
		for range 64 {
			if _, err := io.WriteString(h.ep.w, chunk); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	h.expect(errLine("null", -32600, "Message exceeds the 1000000-byte line limit"))
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16*limit {
		t.Fatalf("allocated %d bytes while discarding a 64 MiB line; want under %d", grew, 16*limit)
	}
	h.send("", req(1, "tools/list", `{}`))
	if id := string(parse(t, h.line()).ID); id != "1" {
		t.Fatalf("id %s", id)
	}
	h.finish()
}

// Case 9: the default limit, at its exact boundary.
func TestDefaultLimit(t *testing.T) {
	h := start(t, pipes)
	go io.WriteString(h.ep.w, strings.Repeat("y", 2_000_000)+"\n") // 2,000,001 bytes
	h.expect(errLine("null", -32600, "Message exceeds the 2000000-byte line limit"))
	r := req(1, "tools/list", `{}`)
	padded := r[:len(r)-1] + strings.Repeat(" ", 2_000_000-1-len(r)) + "}"
	if len(padded)+1 != 2_000_000 {
		t.Fatalf("padded line is %d bytes", len(padded)+1)
	}
	go io.WriteString(h.ep.w, padded+"\n")
	if id := string(parse(t, h.line()).ID); id != "1" {
		t.Fatalf("id %s", id)
	}
	h.finish()
}
