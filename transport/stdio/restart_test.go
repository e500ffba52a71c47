package stdio_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// restartRig serves instance after instance on one device, Reader,
// Session and fault point (internal/faults), as a session does.
type restartRig struct {
	ep     endpoints
	cat    *testCatalog
	reader *stdio.Reader
	sess   *server.SessionState
	point  *faults.Point
	r      *lineSource
	t      *testing.T
	exec   *executor.Executor
}

func newRestartRig(t *testing.T) *restartRig {
	ep := pipes(t)
	exec, _ := executor.New(executor.Limits{})
	g := &restartRig{
		ep: ep, cat: newTestCatalog(), reader: stdio.NewReader(ep.in, 0), sess: server.NewSessionState(0),
		r: newLineSource(ep.r), t: t, exec: exec,
	}
	t.Cleanup(faults.Arm())
	g.point = faults.New(g, nil)
	t.Cleanup(func() {
		g.point.Release()
		g.close()
		exec.Close()
	})
	return g
}

// fault makes the running instance fail once, as a bug would; it returns
// once the instance took the failure.
func (g *restartRig) fault() { faults.Inject(g) }

// serve starts an instance; its channel gets Serve's result.
func (g *restartRig) serve() chan error {
	tr := &stdio.Transport{Reader: g.reader, Out: g.ep.out, Dispatcher: g.cat, Executor: g.exec, State: g.sess}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(faults.With(g.t.Context(), g.point)) }()
	return done
}

// close releases the Reader, the Session and the device.
func (g *restartRig) close() {
	g.reader.Close()
	g.sess.Close()
	g.ep.closeAll()
}

// Case 63: a forced failure of the coordinator answers what is in flight,
// and a new instance on the same device, Reader and Session continues with
// the bytes already read and the negotiated version.
func TestRestartOnSameDevice(t *testing.T) {
	g := newRestartRig(t)
	ep, cat, r, fault, serve := g.ep, g.cat, g.r, g.fault, g.serve
	first := serve()
	io.WriteString(ep.w, initReq("2025-06-18")+"\n")
	r.next(t)
	io.WriteString(ep.w, listen("s")+"\n")
	r.next(t)
	src := <-cat.sources
	io.WriteString(ep.w, call("b", "block", `{}`)+"\n")
	<-cat.started
	fault()
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
	g.close()
	goleakCheck(t)
}

// An instance that took the end of input and then failed: the next ones on
// the same Reader find the input ended and return once they are done.
func TestRestartAfterEOF(t *testing.T) {
	g := newRestartRig(t)
	ep, cat, r, fault, serve := g.ep, g.cat, g.r, g.fault, g.serve
	first := serve()
	io.WriteString(ep.w, call("b", "block", `{}`)+"\n")
	<-cat.started
	ep.closeInput() // the first instance takes EOF, and waits for "b"
	fault()
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
	g.close()
	goleakCheck(t)
}

// The coordinator fails while handling a line that arrived with others:
// the next instance handles the others.
func TestRestartKeepsDeliveredLines(t *testing.T) {
	g := newRestartRig(t)
	ep, r, serve := g.ep, g.r, g.serve
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
	g.close()
	goleakCheck(t)
}
