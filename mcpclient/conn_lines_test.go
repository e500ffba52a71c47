package mcpclient

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

func TestLongLineID(t *testing.T) {
	big := strings.Repeat("x", 1000)
	tests := []struct {
		name string
		line string
		id   int64
		ok   bool
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"result":{"text":"` + big + `"}}`, 7, true},
		{"id last", `{"result":{"text":"` + big + `"},"jsonrpc":"2.0","id":42}`, 42, true},
		{"id last, spaces", `{"result":{"text":"` + big + `"} , "jsonrpc":"2.0" , "id" : 42 } `, 42, true},
		{"error", `{"error":{"code":1,"message":"m","data":"` + big + `"},"jsonrpc":"2.0","id":9}`, 9, true},
		{"nested id is not the id", `{"result":{"text":"` + big + `","id":5}}`, 0, false},
		{"id inside a string", `{"result":{"text":"` + big + `\",\"id\":5"}}`, 0, false},
		{"a request", `{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"t":"` + big + `"}}`, 0, false},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}`, 0, false},
		{"string id", `{"jsonrpc":"2.0","id":"s1","result":{"t":"` + big + `"}}`, 0, false},
		{"not JSON", big, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.line)
			head, tail := b[:min(len(b), watchBytes)], b[max(0, len(b)-watchBytes):]
			id, ok := longLineID(head, tail)
			if id != tt.id || ok != tt.ok {
				t.Errorf("longLineID = %d, %v; want %d, %v", id, ok, tt.id, tt.ok)
			}
		})
	}
}

// lineWatch reports exactly the lines the Reader refuses (the limit counts
// the newline; a last line without one may fill it), with their first and
// last bytes, however the reads cut them.
func TestLineWatch(t *testing.T) {
	const limit = 10
	in := strings.Join([]string{
		"short",
		"123456789",  // 9 bytes + newline: fits
		"1234567890", // 10 + newline: too long
		"A" + strings.Repeat("m", 600) + "Z",
		"ok",
		"0123456789", // the last line, no newline: fits
	}, "\n")
	for _, chunk := range []int{1, 3, 7, 4096} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var long []string
		w := &lineWatch{f: pr, limit: limit, onLong: func(head, tail []byte) {
			long = append(long, string(head[:1])+"…"+string(tail[len(tail)-1:])+" "+string(rune('0'+len(head)/100)))
		}}
		go func() {
			for b := []byte(in); len(b) > 0; b = b[min(chunk, len(b)):] {
				_, _ = pw.Write(b[:min(chunk, len(b))])
			}
			_ = pw.Close()
		}()
		var out bytes.Buffer
		if _, err := io.Copy(&out, w); err != nil {
			t.Fatal(err)
		}
		_ = pr.Close()
		want := []string{"1…0 0", "A…Z 2"}
		if strings.Join(long, "|") != strings.Join(want, "|") || out.String() != in {
			t.Errorf("chunk %d: long lines %q, want %q (data intact: %v)", chunk, long, want, out.String() == in)
		}
	}
}
