package protocol

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// texts is a result of text blocks that splices its large strings.
type texts []string

func (t texts) AppendJSON(dst []byte) ([]byte, error) { return t.AppendJSONSpliced(dst, nil) }

func (t texts) AppendJSONSpliced(dst []byte, sp *Splices) ([]byte, error) {
	dst = append(dst, `{"content":[`...)
	for i, s := range t {
		if i > 0 {
			dst = append(dst, ',')
		}
		if s == "fail" {
			return nil, errors.New("no")
		}
		if s == "panic" {
			panic("no")
		}
		dst = append(dst, `{"type":"text","text":`...)
		dst = AppendStringSpliced(dst, s, sp)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), nil
}

func joined(sp Splices, buf []byte) []byte { return bytes.Join(sp.Parts(nil, buf), nil) }

// TestAppendResultSpliced checks that a spliced frame, its parts joined,
// is the frame AppendResult writes, that only large strings that need no
// escaping are spliced, and that their parts are the strings' own memory.
func TestAppendResultSpliced(t *testing.T) {
	plain := strings.Repeat("lorem ipsum dolor sit amet, héllo 日本 😀 ", SpliceMin/40+1)
	short := plain[:SpliceMin-1]
	exact := plain[:SpliceMin]
	for _, tc := range []struct {
		name    string
		result  texts
		spliced int
	}{
		{"none", texts{}, 0},
		{"small", texts{"hello"}, 0},
		{"one byte short", texts{short}, 0},
		{"at the bound", texts{exact}, 1},
		{"large", texts{plain}, 1},
		{"two large and a small", texts{plain, "x", plain + "y"}, 2},
		{"a quote", texts{plain + `"`}, 0},
		{"a backslash", texts{`\` + plain}, 0},
		{"a newline", texts{plain + "\n" + plain}, 0},
		{"a NUL", texts{plain + "\x00"}, 0},
		{"invalid UTF-8", texts{plain + "\xff"}, 0},
		{"a truncated rune", texts{plain + "\xe6\x97"}, 0},
		{"U+2028", texts{plain + "\u2028"}, 0},
		{"U+2029", texts{"\u2029" + plain}, 0},
		{"U+FFFD", texts{plain + "\ufffd"}, 1},
		{"HTML", texts{plain + "<a&b>/"}, 1},
	} {
		want, err := AppendResult(nil, IntID(7), tc.result)
		if err != nil {
			t.Fatal(err)
		}
		var sp Splices
		buf, err := AppendResultSpliced([]byte("prefix"), IntID(7), tc.result, &sp)
		if err != nil {
			t.Fatal(err)
		}
		if len(sp) != tc.spliced {
			t.Errorf("%s: %d splices, want %d", tc.name, len(sp), tc.spliced)
		}
		if got := joined(sp, buf); !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("%s: the spliced frame differs from AppendResult's", tc.name)
		}
		if len(buf)+sp.Len() != len("prefix")+len(want) {
			t.Errorf("%s: buffer %d + splices %d, want %d", tc.name, len(buf), sp.Len(), len(want))
		}
		for _, s := range sp {
			for _, part := range sp.Parts(nil, buf) {
				if len(part) == len(s.Text) && unsafe.SliceData(part) == unsafe.StringData(s.Text) {
					goto aliased
				}
			}
			t.Errorf("%s: a splice's part is not its string's memory", tc.name)
		aliased:
		}
	}

	// An error or a panic leaves dst and the splices as they were.
	for _, bad := range []texts{{plain, "fail"}, {plain, "panic"}} {
		sp := Splices{{At: 1, Text: "kept"}}
		buf, err := AppendResultSpliced([]byte("x"), IntID(1), bad, &sp)
		if err == nil || string(buf) != "x" || len(sp) != 1 || sp[0].Text != "kept" {
			t.Errorf("%q: %q, %v, splices %v", bad[1], buf, err, len(sp))
		}
	}
	// Without a SplicingAppender, or without splices, nothing is spliced.
	var sp Splices
	if buf, err := AppendResultSpliced(nil, IntID(1), map[string]string{"text": plain}, &sp); err != nil || len(sp) != 0 {
		t.Errorf("a map: %d splices, %v", len(sp), err)
	} else if want, _ := AppendResult(nil, IntID(1), map[string]string{"text": plain}); !bytes.Equal(buf, want) {
		t.Error("a map: the frame differs from AppendResult's")
	}
	if buf, err := AppendResultSpliced(nil, IntID(1), texts{plain}, nil); err != nil {
		t.Error(err)
	} else if want, _ := AppendResult(nil, IntID(1), texts{plain}); !bytes.Equal(buf, want) {
		t.Error("nil splices: the frame differs from AppendResult's")
	}
}

// FuzzAppendString checks AppendString, and AppendStringSpliced's choice
// of what to splice, against encoding/json (AppendValue of a string).
func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "plain", "héllo 日本 😀", "\u2028\u2029", "<a&b>/", "\xff", "a\xe6\x97", "\xed\xa0\x80", "\ufffd", "a\"b\\c\n\x00\x1f\x7f"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := AppendValue(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json gives %s", s, got, want)
		}
		plain := plainPrefix(s) == len(s)
		if wantPlain := bytes.Equal(want, []byte(`"`+s+`"`)); plain != wantPlain {
			t.Fatalf("plainPrefix(%q) says plain %v, encoding/json %v", s, plain, wantPlain)
		}
	})
}
