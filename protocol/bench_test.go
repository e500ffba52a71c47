package protocol

import (
	"strings"
	"testing"
)

// typicalCall is a tools/call line as a 2026 client sends it (about 300 bytes).
var typicalCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_files","arguments":{"pattern":"func main","path":"/home/user/project","maxResults":50},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"progress-42"}}}` + "\n")

// harnessCall is the 2026 echo call bench/cmd/mcpbench sends.
var harnessCall = []byte(`{"jsonrpc":"2.0","id":1234,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench-1234"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n")

func BenchmarkDecode(b *testing.B) {
	big := []byte(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","arguments":{"text":"` +
		strings.Repeat("lorem ipsum dolor sit amet, ", 1<<20/28) + `"}}}` + "\n")
	for _, bc := range []struct {
		name string
		line []byte
	}{
		{"typical", typicalCall},
		{"harness", harnessCall},
		{"1MB-string", big},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.line)))
			for b.Loop() {
				if m := Decode(bc.line); m.Kind != KindRequest {
					b.Fatalf("kind %d err %v", m.Kind, m.Err)
				}
			}
		})
	}
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError"`
}

func BenchmarkEncode(b *testing.B) {
	for _, bc := range []struct {
		name   string
		result any
	}{
		{"typical", toolResult{Content: []textContent{{Type: "text", Text: "main.go:12: func main() {\ncmd/run.go:8: func main() {"}}}},
		{"1MB-text", toolResult{Content: []textContent{{Type: "text", Text: strings.Repeat("lorem ipsum dolor sit amet, ", 1<<20/28)}}}},
		{"1MB-text-fresh", toolResult{Content: []textContent{{Type: "text", Text: strings.Repeat("lorem ipsum dolor sit amet, ", 1<<20/28)}}}},
	} {
		fresh := strings.HasSuffix(bc.name, "-fresh")
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf, err := AppendResult(nil, IntID(42), bc.result)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			if fresh {
				// Into a small buffer, as a connection does for a large
				// result: B/op shows what the growth costs.
				for b.Loop() {
					if _, err = AppendResult(make([]byte, 0, 4096), IntID(42), bc.result); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			for b.Loop() {
				if buf, err = AppendResult(buf[:0], IntID(42), bc.result); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeStrict is BenchmarkDecode without the fast path, to set
// beside it in one run.
func BenchmarkDecodeStrict(b *testing.B) {
	for _, bc := range []struct {
		name string
		line []byte
	}{
		{"typical", typicalCall},
		{"harness", harnessCall},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.line)))
			line := bc.line[:len(bc.line)-1]
			for b.Loop() {
				if m := decodeStrict(line, false, nil); m.Kind != KindRequest {
					b.Fatalf("kind %d err %v", m.Kind, m.Err)
				}
			}
		})
	}
}
