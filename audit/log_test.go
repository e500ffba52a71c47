package audit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// end is a tools/call's RequestEnd of a session with a caller.
func end(args string) server.RequestEnd {
	st := server.NewSessionState(0)
	st.SetCaller(&server.Caller{Session: 7, View: "mem", Peer: server.Peer{Known: true, UID: 1000, PID: 42, Exe: "/usr/bin/client"}})
	return server.RequestEnd{Method: "tools/call", Item: "echo", Duration: 1500 * time.Microsecond, End: time.Now(),
		Params: json.RawMessage(`{"name":"echo","arguments":` + args + `}`), State: st,
		ClientInfo: json.RawMessage(`{"name":"cli","version":"2"}`)}
}

func open(t testing.TB, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// The hand-written line is what encoding/json makes of the Record it
// reads back as, field by field.
func TestLineIsRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.log")
	l := open(t, Options{File: path, Arguments: true, Secrets: []string{"supersecret"}})
	e := end(`{"b":[1,2.50,{"token":"x"}],"a":"say \"supersecret\" é\u2028"}`)
	e.Err = &protocol.Error{Code: -32602}
	l.RequestEnded(e)
	l.RequestEnded(server.RequestEnd{Method: "resources/read", Params: json.RawMessage(`{"uri":"file:///x?k=supersecret"}`), Cancelled: true})
	l.RequestEnded(server.RequestEnd{Method: "tools/list"}) // not audited
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	got := lines(t, path)
	if len(got) != 2 {
		t.Fatalf("%d lines: %q", len(got), got)
	}
	for _, line := range got {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != line {
			t.Errorf("line\n%s\nencoding/json of its record\n%s", line, again)
		}
	}
	want := `{"time":"` // then the rest, checked by field
	if !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], `"session":7,"peer":{"uid":1000,"pid":42,"exe":"/usr/bin/client"},"client":{"name":"cli","version":"2"},"view":"mem","server":"","method":"tools/call","tool":"echo","args_digest":"sha256:`) ||
		!strings.Contains(got[0], `"arguments":{"a":"say \"[redacted]\" é\u2028","b":[1,2.50,{"token":"[redacted]"}]},"outcome":"error","code":-32602,"duration_ms":1.5}`) {
		t.Errorf("line %s", got[0])
	}
	if !strings.Contains(got[1], `"session":0,"view":"","server":"","method":"resources/read","uri":"file:///x?k=[redacted]","outcome":"cancelled"`) {
		t.Errorf("line %s", got[1])
	}
}

// The digest is the canonical JSON's, whatever the order, spacing and
// escapes the client wrote; the fast path (input canonical already)
// agrees with the slow one.
func TestDigest(t *testing.T) {
	same := []string{
		`{"a":1,"b":"x"}`,
		`{"b":"x","a":1}`,
		` { "a" : 1 , "b" : "\u0078" } `,
	}
	want, _ := Digest(json.RawMessage(same[0]))
	for _, s := range same {
		if d, _ := digest([]byte(s)); d != want {
			t.Errorf("digest(%s) = %s, want %s", s, d, want)
		}
	}
	if d, _ := digest([]byte(`{"a":1,"b":"y"}`)); d == want {
		t.Error("different arguments, same digest")
	}
	empty, _ := Digest(json.RawMessage(`{}`))
	for _, s := range []string{"", "null", "{}"} {
		if d, _ := digest([]byte(s)); d != empty {
			t.Errorf("digest(%q) = %s, want {}'s %s", s, d, empty)
		}
	}
	for _, s := range []string{
		`{"a":[1,true,false,null,{"z":"\"\\\n\r\t"}],"é":"ü"}`, `{"a":"<&>"}`, `{"b":1,"a":2}`, `{"a":"\b\f"}`,
		`{"a":"\u2028"}`, `{"a":1,"a":2}`, `{"a":1e10,"b":-0.5}`, `[]`, `"s"`, `{"a\"":1}`,
	} {
		v, err := decode([]byte(s))
		if err != nil {
			t.Fatal(s, err)
		}
		c, _ := canonical(v)
		if isCanonical([]byte(s)) && string(c) != s { // false of a canonical one only costs time
			t.Errorf("isCanonical(%s), but canonical is %s", s, c)
		}
		fast, _ := digest([]byte(s))
		slow, _ := Digest(json.RawMessage(s))
		if fast != slow {
			t.Errorf("%s: fast digest %s, slow %s", s, fast, slow)
		}
	}
}

func TestSecretKey(t *testing.T) {
	for k, want := range map[string]bool{
		"token": true, "access_token": true, "Password": true, "client-secret": true, "Authorization": true,
		"api_key": true, "apiKey": true, "x.api.key": true, "key": true, "pass": true, "cookie": true,
		"text": false, "monkey": false, "path": false, "passage": false, "name": false,
	} {
		if SecretKey(k) != want {
			t.Errorf("SecretKey(%q) = %v, want %v", k, !want, want)
		}
	}
}

// A line that would take the file past max_size starts a new file; one
// that brings it to max_size exactly does not. max_files rotations are
// kept, the oldest removed.
func TestRotationAtTheBoundary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	var enc encoder
	e := end(`{"text":"x"}`)
	r := newRecord(&e, toolsCall)
	n := int64(len(enc.appendRecord(nil, &r, r.addBytes(&e, nil))))
	l := open(t, Options{File: path, MaxSize: 2 * n, MaxFiles: 2})
	write := func(k int) {
		for range k {
			l.RequestEnded(e)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	size := func(p string) int64 {
		st, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	write(2)
	if size(path) != 2*n || size(Rotated(path, 1)) != -1 {
		t.Fatalf("two lines: size %d (want %d, exactly max_size), rotation %d (want none)", size(path), 2*n, size(Rotated(path, 1)))
	}
	write(1)
	if size(path) != n || size(Rotated(path, 1)) != 2*n {
		t.Fatalf("the third line: size %d, .1 %d; want %d and %d", size(path), size(Rotated(path, 1)), n, 2*n)
	}
	write(4) // fills a.log, rotates twice
	if size(path) != n || size(Rotated(path, 1)) != 2*n || size(Rotated(path, 2)) != 2*n || size(Rotated(path, 3)) != -1 {
		t.Fatalf("after 7 lines: %d %d %d %d", size(path), size(Rotated(path, 1)), size(Rotated(path, 2)), size(Rotated(path, 3)))
	}
	for _, p := range []string{path, Rotated(path, 1), Rotated(path, 2)} {
		st, _ := os.Stat(p)
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", p, st.Mode().Perm())
		}
	}
}

// Reopen writes to the path again after something (logrotate) moved the
// file away.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	l := open(t, Options{File: path})
	l.RequestEnded(end(`{}`))
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil { // writes the queued line to the moved file first
		t.Fatal(err)
	}
	l.RequestEnded(end(`{}`))
	l.Sync()
	if a, b := lines(t, path+".moved"), lines(t, path); len(a) != 1 || len(b) != 1 {
		t.Errorf("moved %d lines, new %d; want 1 and 1", len(a), len(b))
	}
}

// With the writer stuck, a request still returns at once: the queue
// takes what it has room for and the rest is counted dropped.
func TestDropsWhenTheWriterIsStuck(t *testing.T) {
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var out bytes.Buffer
	const queue = 8
	l := open(t, Options{File: "test", Queue: queue, out: &out, Logger: slog.New(slog.DiscardHandler), stall: func() {
		once.Do(func() { close(stuck); <-release })
	}})
	l.RequestEnded(end(`{}`)) // wakes the writer, which stalls as it begins to drain
	<-stuck
	start := time.Now()
	const more = queue + 5
	for range more {
		l.RequestEnded(end(`{}`))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("%d requests took %v with the writer stuck", more, d)
	}
	// The first record is still queued: room for queue-1 more.
	if got := l.Dropped(); got != more-(queue-1) {
		t.Errorf("dropped %d, want %d", got, more-(queue-1))
	}
	close(release)
	l.Sync()
	if n := bytes.Count(out.Bytes(), []byte("\n")); n != queue {
		t.Errorf("%d lines written, want the queue's %d", n, queue)
	}
}

// BenchmarkRecord is one record: what the request pays (RequestEnded) and
// the writer's encoding and writing, to a file, CPU time per record.
func BenchmarkRecord(b *testing.B) {
	for _, args := range []bool{false, true} {
		b.Run(map[bool]string{false: "digest", true: "arguments"}[args], func(b *testing.B) {
			l := open(b, Options{File: filepath.Join(b.TempDir(), "a.log"), Arguments: args, MaxSize: 1 << 30})
			e := end(`{"text":"bench"}`)
			c0 := cpu()
			n := 0
			for b.Loop() {
				for range 256 {
					l.RequestEnded(e)
				}
				l.Sync()
				n += 256
			}
			b.ReportMetric(float64(cpu()-c0)/float64(n), "cpu-ns/record")
		})
	}
}

func cpu() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func TestTimeAndMillis(t *testing.T) {
	var x encoder
	for _, tm := range []time.Time{time.Date(2026, 12, 2, 13, 4, 5, 7e6, time.UTC), time.Date(2026, 12, 2, 13, 4, 5, 999999999, time.UTC),
		time.Date(2026, 12, 2, 14, 4, 6, 0, time.FixedZone("x", 3600))} {
		if got, want := string(x.appendTime(nil, tm)), tm.UTC().Format(TimeFormat); got != want {
			t.Errorf("%v: %s, want %s", tm, got, want)
		}
	}
	for _, us := range []int64{0, 1, 10, 100, 1500, 1234567, 999, 1000} {
		want := strconv.FormatFloat(float64(us)/1000, 'f', -1, 64)
		if got := string(appendMillis(nil, us)); got != want {
			t.Errorf("%d µs: %s, want %s", us, got, want)
		}
	}
}

// writes records each Write the writer makes.
type writes struct {
	mu    sync.Mutex
	calls [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, bytes.Clone(p))
	return len(p), nil
}

// Each write holds whole lines, at most writeBytes of them: a reader,
// or another process appending during an upgrade, never sees half a line.
func TestWritesHoldWholeLines(t *testing.T) {
	var w writes
	l := open(t, Options{File: "test", out: &w})
	for range 2000 { // about 600 KB
		l.RequestEnded(end(`{"text":"` + strings.Repeat("x", 100) + `"}`))
	}
	l.Sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.calls) < 2 {
		t.Fatalf("%d writes", len(w.calls))
	}
	lines := 0
	for i, c := range w.calls {
		if len(c) > writeBytes || c[len(c)-1] != '\n' {
			t.Errorf("write %d: %d bytes, ends %q", i, len(c), c[len(c)-1])
		}
		lines += bytes.Count(c, []byte("\n"))
	}
	if lines != 2000 {
		t.Errorf("%d lines", lines)
	}
}
