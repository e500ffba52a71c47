package load

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/bench/internal/wire"
)

// fakeServer answers echo calls read from in on out, in batches of four
// answered in reverse order (as a concurrent server may), and answers
// the call whose text is "bench-13" with another call's text.
func fakeServer(t *testing.T, in io.Reader, out io.WriteCloser) {
	t.Helper()
	go func() {
		defer out.Close()
		sc := bufio.NewScanner(in)
		var batch [][]byte
		flush := func() {
			for i := len(batch) - 1; i >= 0; i-- {
				out.Write(batch[i])
			}
			batch = batch[:0]
		}
		for sc.Scan() {
			line := sc.Bytes()
			id := wire.Member(line, "id")
			text := wire.Path(line, "params", "arguments", "text")
			if string(text) == `"bench-13"` {
				text = []byte(`"bench-12"`)
			}
			batch = append(batch, []byte(`{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[{"type":"text","text":`+string(text)+`}],"isError":false}}`+"\n"))
			if len(batch) == 4 {
				flush()
			}
		}
		flush()
	}()
}

func TestPipelineMatchesAnswersById(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	fakeServer(t, inR, outW)
	c := NewConn(outR, inW, 16)
	r := &StdioResult{}
	lat, _, wrong, err := pipeline(c, wire.Dialect{Version: wire.V20250618}, 10, 40, 8, 5*time.Second, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 40 {
		t.Errorf("%d latencies, want 40", len(lat))
	}
	if wrong != 1 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], `wrong text "bench-12" for "bench-13"`) {
		t.Errorf("wrong = %d, problems %q; want the one wrong answer to call 13", wrong, r.Problems)
	}
	inW.Close()
	if _, err := c.Next(time.Second); err != io.EOF {
		t.Errorf("after the server closed: %v, want io.EOF", err)
	}
}

func TestConnLongLinesAndTimeout(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 100_000) + `"}]}}`
	c := NewConn(strings.NewReader(long+"\r\n"+`{"jsonrpc":"2.0","method":"notifications/progress"}`+"\n"), io.Discard, 4)
	l, skipped, err := c.Await(1, time.Second)
	if err != nil || len(l.Text()) != 100_000 || len(skipped) != 0 {
		t.Fatalf("Await(1) = %d text bytes, %d skipped, %v", len(l.Text()), len(skipped), err)
	}
	if _, skipped, err := c.Await(2, time.Second); err != io.EOF || len(skipped) != 1 || skipped[0].Method != "notifications/progress" {
		t.Errorf("Await(2) skipped %d, %v; want the notification skipped, then io.EOF", len(skipped), err)
	}
	r, w := io.Pipe()
	defer w.Close()
	if _, err := NewConn(r, io.Discard, 1).Next(10 * time.Millisecond); err != ErrTimeout {
		t.Errorf("Next on a silent server = %v, want ErrTimeout", err)
	}
}

func TestCheckEcho(t *testing.T) {
	line := func(s string) Line { return Line{Bytes: []byte(s), Frame: wire.Parse([]byte(s))} }
	good := line(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"bench-4"}]}}`)
	if what := CheckEcho(good, 4); what != "" {
		t.Errorf("good answer: %s", what)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"busy"}}`, `error -32000 "busy"`},
		{`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"x"}],"isError":true}}`, "isError result"},
		{`{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`, "wrong text"},
	} {
		if what := CheckEcho(line(tc.line), 4); !strings.Contains(what, tc.want) {
			t.Errorf("CheckEcho(%s) = %q, want %q", tc.line, what, tc.want)
		}
	}
}

func TestProcFigures(t *testing.T) {
	if u, err := ProcUsage(os.Getpid()); err != nil || u.Run <= 0 {
		t.Errorf("ProcUsage = %+v, %v", u, err)
	}
	for _, field := range []string{"VmRSS", "VmHWM"} {
		if n, err := ProcStatus(os.Getpid(), field); err != nil || n <= 0 {
			t.Errorf("ProcStatus(%s) = %d, %v", field, n, err)
		}
	}
	if got := NoFileLimit(os.Getpid()); !strings.Contains(got, "/") {
		t.Errorf("NoFileLimit = %q", got)
	}
	var tl tail
	tl.max = 4
	tl.Write([]byte("abc"))
	tl.Write([]byte("defg"))
	if tl.String() != "defg" {
		t.Errorf("tail kept %q", tl.String())
	}
}
