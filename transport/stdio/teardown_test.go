package stdio_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// Case 58: admitted requests finish after EOF.
func TestDrainAfterEOF(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		h.send(call("late", "echo", `{"text":"late","delayMs":200}`))
		h.closeInput()
		if got := resultText(t, h.line()); got != "late" {
			t.Fatalf("got %s", got)
		}
		h.finish()
	})
}

// Case 60: a read error is reported, then handled as EOF.
func TestReadError(t *testing.T) {
	dir, err := os.Open(t.TempDir()) // reading a directory fails with EISDIR
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	ep := pipes(t)
	defer ep.closeAll()
	tr := &stdio.Transport{In: dir, Out: ep.out, Dispatcher: newTestCatalog()}
	if err := tr.Serve(t.Context()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 200)
	n, _ := ep.r.Read(buf)
	if got := string(buf[:n]); got != errLine("null", -32700, "Failed to read stdio input")+"\n" {
		t.Fatalf("got %q", got)
	}
	goleakCheck(t)
}

// A reader that panics is recovered and reported.
func TestReaderPanic(t *testing.T) {
	ep := pipes(t)
	defer ep.closeAll()
	tr := &stdio.Transport{In: panicReader{}, Out: ep.out, Dispatcher: newTestCatalog()}
	if err := tr.Serve(t.Context()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 200)
	n, _ := ep.r.Read(buf)
	if got := string(buf[:n]); got != errLine("null", -32700, "Stdio reader terminated unexpectedly")+"\n" {
		t.Fatalf("got %q", got)
	}
	goleakCheck(t)
}

type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("device driver bug") }

// Case 62: shutdown ends streams with notifications/cancelled, refuses new
// requests, and after the grace period answers what is left.
func TestShutdown(t *testing.T) {
	ep := pipes(t)
	cat := newTestCatalog()
	exec, _ := executor.New(executor.Limits{})
	defer exec.Close()
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: cat, Executor: exec, Limits: limits.Limits{ShutdownGrace: 50 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- tr.Serve(ctx) }()
	w := ep.w
	r := newLineSource(ep.r)
	w.Write([]byte(listen("s") + "\n"))
	r.next(t)
	src := <-cat.sources
	w.Write([]byte(call("b", "block", `{}`) + "\n"))
	<-cat.started
	cancel()
	if l := r.next(t); l != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s","reason":"Subscription closed by server"}}` {
		t.Fatalf("got %s", l)
	}
	if got := <-src.closed; got.reason != server.ClosedByServer {
		t.Fatalf("closed with %+v", got)
	}
	w.Write([]byte(req("new", "tools/list", `{}`) + "\n"))
	if l := r.next(t); l != errLine(`"new"`, -32603, "Session closed by server") {
		t.Fatalf("got %s", l)
	}
	if l := r.next(t); l != errLine(`"b"`, -32603, "Session closed by server") {
		t.Fatalf("got %s", l)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	<-cat.ctxEnded
	// The device stays open.
	if _, err := ep.out.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	ep.closeAll()
	goleakCheck(t)
}

// Shutdown lets admitted work finish within the grace period.
func TestShutdownDrains(t *testing.T) {
	ep := pipes(t)
	cat := newTestCatalog()
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: cat, Limits: limits.Limits{ShutdownGrace: 5 * time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- tr.Serve(ctx) }()
	r := newLineSource(ep.r)
	ep.w.Write([]byte(call("slow", "echo", `{"text":"done","delayMs":100}`) + "\n"))
	time.Sleep(20 * time.Millisecond)
	cancel()
	if l := r.next(t); !strings.Contains(l, `"done"`) {
		t.Fatalf("got %s", l)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	ep.closeAll()
	goleakCheck(t)
}

// Case 73: invalid limits are refused before any byte is read, all at once;
// zero means the default.
func TestValidate(t *testing.T) {
	tr := &stdio.Transport{In: os.Stdin, Out: os.Stdout, Dispatcher: newTestCatalog(),
		Limits: limits.Limits{MaxLineBytes: -1, WriteTimeout: -time.Second, MaxSubscriptions: -1, ShutdownGrace: -1}}
	err := tr.Serve(t.Context())
	for _, want := range []string{
		"max_line_bytes must be a positive integer",
		"write_timeout must be a positive duration",
		"max_subscriptions must be a positive integer",
		"shutdown_grace must be a positive duration",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := executor.New(executor.Limits{MaxQueue: -1}); err == nil || err.Error() != "max_queue must be a positive integer" {
		t.Errorf("executor error %v", err)
	}
	if err := (&stdio.Transport{In: os.Stdin, Out: os.Stdout, Dispatcher: newTestCatalog()}).Validate(); err != nil {
		t.Errorf("zero limits: %v", err)
	}
}

// Requests already sent when shutdown begins are answered, not left
// unread: admitted ones finish, later ones get "Session closed by server".
func TestShutdownAnswersLinesInFlight(t *testing.T) {
	for range 20 {
		ep := pipes(t)
		cat := newTestCatalog()
		tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: cat, Limits: limits.Limits{ShutdownGrace: 5 * time.Second}}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- tr.Serve(ctx) }()
		r := newLineSource(ep.r)
		var batch strings.Builder
		for i := range 10 {
			batch.WriteString(call(i, "echo", `{"text":"x","delayMs":20}`) + "\n")
		}
		ep.w.Write([]byte(batch.String()))
		cancel()
		seen := map[string]bool{}
		for range 10 {
			f := parse(t, r.next(t))
			if seen[string(f.ID)] || f.Result == nil && (f.Error == nil || f.Error.Message != "Session closed by server") {
				t.Fatalf("unexpected answer %+v", f)
			}
			seen[string(f.ID)] = true
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		ep.closeAll()
	}
	goleakCheck(t)
}
