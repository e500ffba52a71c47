package daemon

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/transport/stdio"
)

// handOver passes a fresh pipe pair to the daemon, as `snodod connect`
// does, runs the handshake and starts a sleep of an hour on it.
func handOver(t *testing.T, r *running) (*pipes, *control.Handover) {
	t.Helper()
	p := newPipes(t)
	h, err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.in.Close()
	p.out.Close()
	if _, err := io.WriteString(p.toDaemon, initLine+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":3600000}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if got := p.line(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Fatalf("initialize: %s", got)
	}
	eventually.True(t, "the sleep to run", func() bool { return r.d.Status().Executor.Running == 1 })
	return p, h
}

// `snodod kill ID` ends the session at once, whatever its grace: its
// request is answered, its device released, and the connect client told.
func TestKillSession(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.shutdown_grace": "1h"}), Options{})
	p, h := handOver(t, r)
	if err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Kill(t.Context(), h.Session); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	// Kill returned after the end: the session is gone already.
	if n := r.d.count(); n != 0 {
		t.Errorf("%d sessions after Kill", n)
	}
	if got, want := p.line(t), `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Session closed by server"}}`; got != want {
		t.Errorf("the sleep: %s, want %s", got, want)
	}
	if got := p.line(t); got != "" {
		t.Errorf("then %q, want end of input", got)
	}
	var ended *control.SessionError
	if err := h.Wait(); !errors.As(err, &ended) || !strings.Contains(ended.Message, stdio.ErrKilled.Error()+": by snodod kill") {
		t.Errorf("Wait: %v", err)
	}
	var refused *control.RefusedError
	if err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Kill(t.Context(), 99); !errors.As(err, &refused) || refused.Message != "no session 99; 'snodod status' lists the sessions" {
		t.Errorf("Kill of an unknown session: %v", err)
	}
}

// A connect client that goes away (its process exited or was killed: its
// control connection ends) takes its session with it: a terminal handed
// over was otherwise left in raw mode, with nothing reading it.
func TestConnectClientLeavesEndsSession(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.shutdown_grace": "1h"}), Options{})
	p, h := handOver(t, r)
	h.Close()
	if got, want := p.line(t), `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Session closed by server"}}`; got != want {
		t.Errorf("the sleep: %s, want %s", got, want)
	}
	if got := p.line(t); got != "" {
		t.Errorf("then %q, want end of input", got)
	}
	eventually.True(t, "the session to be reaped", func() bool { return r.d.count() == 0 })
}

// RefusalMessage recognises exactly the daemon's refusal lines.
func TestRefusalMessage(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string
		ok   bool
	}{
		{string(refusalLine(capacityError(3))) + "\n", "Server session capacity exhausted (daemon.max_sessions = 3)", true},
		{string(refusalLine(uidError(1001))), "Connection refused: uid 1001 is not allowed (daemon.allowed_uids)", true},
		{string(refusalLine(errShuttingDown)), "Server is shutting down", true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Server is shutting down"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, "", false},
		{`not json`, "", false},
	} {
		if got, ok := RefusalMessage([]byte(tc.line)); got != tc.want || ok != tc.ok {
			t.Errorf("RefusalMessage(%s) = %q, %v", tc.line, got, ok)
		}
	}
}
