package protocol

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/tools/txtar"
)

// transcriptLines are the lines of the transport's transcripts
// (transport/stdio/testdata/transcripts), a client's and the server's:
// what Decode and DecodeFromServer see in practice.
func transcriptLines(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob("../transport/stdio/testdata/transcripts/*/*.txtar")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no transcripts: %v", err)
	}
	var lines [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range txtar.Parse(data).Files {
			for line := range bytes.Lines(f.Data) {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// fastSeeds are lines the fast path takes, or almost takes: the edges of
// its bounds, and lines that differ from one it takes by one byte.
func fastSeeds() []string {
	return []string{
		string(typicalCall), string(harnessCall),
		call("1", `{`+membersN(fastRecorded)+`}`),
		call("1", `{`+membersN(fastRecorded+1)+`}`),
		call("1", `{"x":`+nested("[", "]", fastDepth-4)+`}`),
		call("1", `{"x":`+nested("[", "]", fastDepth-3)+`}`),
		call("1", `{"x":{`+membersN(fastNames-8)+`}}`),
		call("1", `{"x":{`+membersN(fastNames)+`}}`),
		call("1", `{"text":"a","text":"b"}`),
		call("1", `{"abcdefgh":1,"abcdefgi":2,"abcdefgh":3}`),
		call("1", `{"":1,"":2}`),
		call("1", `{"":1,"a":{"":2}}`),
		call("1", `{"t":"\n\u00e9\ud83d\ude00","u":"日本"}`),
		`{"jsonrpc":"2.0","id":"\u0061","method":"tools\/list"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","result":1,"error":2}`,
		`{"jsonrpc":"1.0","id":1,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`,
		`{"method":"notifications/progress","params":{"progressToken":1,"progress":0.5,"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":[],"arguments":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":"t"},"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m"} `,
		`{"jsonrpc":"2.0","id":1,"method":"m"}` + "\r",
		`{"jsonrpc":"2.0", "id":1,"method":"m"}`,
		`{"a":true,"b":false,"c":null,"d":-0.5e+3,"e":[1,"x",{}]}`,
		`{"a":tru}`, `{"a":1,}`, `{"a":[1,]}`, `{"a"}`, `{"a":1`, `{`, `{}`, `{}{}`,
	}
}

// decodeBoth decodes line with the fast path and strictly.
func decodeBoth(line []byte, fromServer bool) (fast Message, taken bool, strict Message) {
	text := line
	if n := len(text); n > 0 && text[n-1] == '\n' {
		text = text[:n-1]
	}
	fast, taken = decodeFast(text, fromServer, nil)
	return fast, taken, decodeStrict(text, fromServer, nil)
}

// sameMessage reports how a and b differ, or "" when they are the same:
// the same fields, byte for byte, and the same error (the same shared
// value, so the same text).
func sameMessage(a, b Message) string {
	if a.Err != b.Err {
		return "errors differ"
	}
	if !reflect.DeepEqual(a, b) {
		return "messages differ"
	}
	return ""
}

// FuzzFastPath checks the fast path against the strict decoder: on every
// line (and in both modes), what Decode returns is what the strict decoder
// returns (the same kind, id, method, error and its text, params and
// their split), and when the fast path takes a line its message is the
// strict decoder's.
func FuzzFastPath(f *testing.F) {
	for _, tc := range decodeCases {
		if len(tc.line) < 4096 {
			f.Add([]byte(tc.line))
		}
	}
	for _, line := range transcriptLines(f) {
		f.Add(line)
	}
	for _, seed := range fastSeeds() {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, fromServer := range []bool{false, true} {
			fast, taken, strict := decodeBoth(line, fromServer)
			if taken {
				if diff := sameMessage(fast, strict); diff != "" {
					t.Fatalf("fromServer %v, %q: the fast path took it, %s:\nfast   %+v\nstrict %+v", fromServer, line, diff, fast, strict)
				}
			}
			if diff := sameMessage(decode(line, fromServer, nil), strict); diff != "" {
				t.Fatalf("fromServer %v, %q: decode and the strict decoder: %s", fromServer, line, diff)
			}
			if diff := sameMessage(decode(line, fromServer, make(Object, 0, 8)), strict); diff != "" {
				t.Fatalf("fromServer %v, %q: decode into an array and the strict decoder: %s", fromServer, line, diff)
			}
		}
	})
}

// TestFastPath checks the fast path on the contract's cases, the
// transcripts and its own seeds: the same message as the strict decoder
// where it takes a line, and that it takes the compact lines clients send
// and gives up on the rest.
func TestFastPath(t *testing.T) {
	var lines [][]byte
	for _, tc := range decodeCases {
		lines = append(lines, []byte(tc.line))
	}
	lines = append(lines, transcriptLines(t)...)
	for _, seed := range fastSeeds() {
		lines = append(lines, []byte(seed))
	}
	takenCount := 0
	for _, line := range lines {
		for _, fromServer := range []bool{false, true} {
			fast, taken, strict := decodeBoth(line, fromServer)
			if taken {
				takenCount++
				if diff := sameMessage(fast, strict); diff != "" {
					t.Errorf("fromServer %v, %.200q: %s:\nfast   %+v\nstrict %+v", fromServer, line, diff, fast, strict)
				}
			}
		}
	}
	if takenCount < len(lines) { // half of the decodes
		t.Errorf("the fast path took %d of %d decodes: it should take most", takenCount, 2*len(lines))
	}

	for _, tc := range []struct {
		name  string
		line  string
		taken bool
	}{
		{"typical call", string(typicalCall), true},
		{"harness call", string(harnessCall), true},
		{"escapes in values", call("1", `{"t":"a\nb\u00e9"}`), true},
		{"UTF-8 in values", call("1", `{"t":"héllo 日本 😀"}`), true},
		{"a response", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}]}}`, true},
		{"same names apart", call("1", `{"x":{"n":1},"y":{"n":1},"n":1}`), true},
		{"same key, other names", call("1", `{"abcdefgh":1,"abcdefgi":2}`), true},
		{"refused by classify", `{"jsonrpc":"1.0","id":1,"method":"m"}`, true},
		{"recorded members at the bound", call("1", `{`+membersN(fastRecorded)+`}`), true},
		{"recorded members past the bound", call("1", `{`+membersN(fastRecorded+1)+`}`), false},
		{"nesting past the bound", call("1", `{"x":`+nested("[", "]", fastDepth)+`}`), false},
		{"a duplicate", call("1", `{"text":"a","text":"b"}`), false},
		{"a duplicate with the same key", call("1", `{"abcdefgh":1,"abcdefgi":2,"abcdefgh":3}`), false},
		{"an escaped name", `{"jsonrpc":"2.0","id":1,"method":"m","p\u0061rams":{}}`, false},
		{"whitespace", `{"jsonrpc":"2.0", "id":1,"method":"m"}`, false},
		{"a CR", `{"jsonrpc":"2.0","id":1,"method":"m"}` + "\r\n", false},
		{"a BOM", "\xEF\xBB\xBF" + `{"jsonrpc":"2.0","id":1,"method":"m"}`, false},
		{"not an object", `[1]`, false},
		{"invalid", `{"a":1,}`, false},
	} {
		_, taken, _ := decodeBoth([]byte(tc.line), false)
		if taken != tc.taken {
			t.Errorf("%s: taken %v, want %v", tc.name, taken, tc.taken)
		}
	}
}

func membersN(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"m` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":1`)
	}
	return b.String()
}

// TestDecodeInto checks that DecodeInto gives Decode's message, its
// Split's members in the array it was given when it has room for them
// all, and in an array of their own otherwise.
func TestDecodeInto(t *testing.T) {
	for _, line := range []string{string(harnessCall), string(typicalCall), " " + string(harnessCall)} {
		want := Decode([]byte(line))
		n := len(want.Members) + len(want.Meta) + len(want.Arguments)
		for _, room := range []int{n, n - 1} {
			members := make(Object, 0, room)
			got := DecodeInto([]byte(line), members)
			if diff := sameMessage(got, want); diff != "" {
				t.Fatalf("room %d, %.40q: %s", room, line, diff)
			}
			inside := unsafe.SliceData(got.Members) == unsafe.SliceData(members[:1])
			if inside != (room == n) {
				t.Errorf("room %d of %d, %.40q: members in the given array %v", room, n, line, inside)
			}
		}
	}
	if m := DecodeInto([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), nil); m.Kind != KindRequest || m.Members != nil {
		t.Errorf("no params, no room: %+v", m)
	}
}
