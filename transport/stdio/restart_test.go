package stdio_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

// Case 63: a forced failure of the coordinator answers what is in flight,
// and a new instance on the same device, Reader and Session continues with
// the bytes already read and the negotiated version.
func TestRestartOnSameDevice(t *testing.T) {
	ep := pipes(t)
	defer ep.closeAll()
	cat := newTestCatalog()
	exec, _ := server.NewExecutor(server.ExecutorLimits{})
	defer exec.Close()
	reader := stdio.NewReader(ep.in, 0)
	defer reader.Close()
	sess := server.NewSession(0)
	defer sess.Close()
	fault := make(chan struct{})
	serve := func() chan error {
		tr := &stdio.Transport{Reader: reader, Out: ep.out, Dispatcher: cat, Executor: exec, Session: sess, Fault: fault}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(t.Context()) }()
		return done
	}
	r := newLineSource(ep.r)
	first := serve()
	io.WriteString(ep.w, initReq("2025-06-18")+"\n")
	r.next(t)
	io.WriteString(ep.w, listen("s")+"\n")
	r.next(t)
	src := <-cat.sources
	io.WriteString(ep.w, call("b", "block", `{}`)+"\n")
	<-cat.started
	fault <- struct{}{}
	want := map[string]bool{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s","reason":"Subscription closed by server"}}`: true,
		errLine(`"b"`, -32603, "Session closed by server"):                                                                         true,
	}
	for range 2 {
		if l := r.next(t); !want[l] {
			t.Fatalf("unexpected line %s", l)
		}
	}
	if err := <-first; !errors.Is(err, stdio.ErrSessionFailed) {
		t.Fatalf("Serve returned %v", err)
	}
	if got := <-src.closed; got.reason != server.ClosedByServer {
		t.Fatalf("source closed with %+v", got)
	}
	<-cat.ctxEnded

	// Sent while no instance serves: the Reader holds it for the next one.
	io.WriteString(ep.w, lreq(3, "tools/list", map[string]any{})+"\n")
	second := serve()
	if v, _ := headerVersion(t, r.next(t)); v != "2025-06-18" {
		t.Fatalf("negotiated version lost: %q", v)
	}
	ep.closeInput()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	reader.Close()
	sess.Close()
	ep.closeAll()
	goleakCheck(t)
}

// An instance that took the end of input and then failed: the next ones on
// the same Reader find the input ended and return once they are done.
func TestRestartAfterEOF(t *testing.T) {
	ep := pipes(t)
	defer ep.closeAll()
	cat := newTestCatalog()
	exec, _ := server.NewExecutor(server.ExecutorLimits{})
	defer exec.Close()
	reader := stdio.NewReader(ep.in, 0)
	defer reader.Close()
	fault := make(chan struct{})
	serve := func() chan error {
		tr := &stdio.Transport{Reader: reader, Out: ep.out, Dispatcher: cat, Executor: exec, Fault: fault}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(t.Context()) }()
		return done
	}
	r := newLineSource(ep.r)
	first := serve()
	io.WriteString(ep.w, call("b", "block", `{}`)+"\n")
	<-cat.started
	ep.closeInput() // the first instance takes EOF, and waits for "b"
	fault <- struct{}{}
	if l := r.next(t); l != errLine(`"b"`, -32603, "Session closed by server") {
		t.Fatalf("unexpected line %s", l)
	}
	if err := <-first; !errors.Is(err, stdio.ErrSessionFailed) {
		t.Fatalf("Serve returned %v", err)
	}
	for _, which := range []string{"second", "third"} {
		select {
		case err := <-serve():
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s instance did not see the end of input", which)
		}
	}
	reader.Close()
	ep.closeAll()
	goleakCheck(t)
}

// The coordinator fails while handling a line that arrived with others:
// the next instance handles the others.
func TestRestartKeepsDeliveredLines(t *testing.T) {
	ep := pipes(t)
	defer ep.closeAll()
	cat := newTestCatalog()
	exec, _ := server.NewExecutor(server.ExecutorLimits{})
	defer exec.Close()
	reader := stdio.NewReader(ep.in, 0)
	defer reader.Close()
	serve := func() chan error {
		tr := &stdio.Transport{Reader: reader, Out: ep.out, Dispatcher: cat, Executor: exec}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(t.Context()) }()
		return done
	}
	r := newLineSource(ep.r)
	first := serve()
	failing := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"panic","version":"1"}}}`
	// One write: the Reader delivers the three lines together.
	io.WriteString(ep.w, failing+"\n"+req(2, "tools/list", `{}`)+"\n"+req(3, "tools/list", `{}`)+"\n")
	if err := <-first; !errors.Is(err, stdio.ErrSessionFailed) {
		t.Fatalf("Serve returned %v", err)
	}
	second := serve()
	got := map[string]bool{}
	for range 2 {
		got[string(parse(t, r.next(t)).ID)] = true
	}
	if !got["2"] || !got["3"] {
		t.Fatalf("answers for %v, want 2 and 3", got)
	}
	ep.closeInput()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	reader.Close()
	ep.closeAll()
	goleakCheck(t)
}
