package daemon

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// During a drain the control socket keeps answering, with the state
// "draining" and the sessions still finishing, until Run returns; a
// connect is refused with the same line a session socket client gets
// (docs/architecture.md §10). After a clean drain nothing is left
// behind: no socket, no lock file.
func TestStatusWhileDraining(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.shutdown_grace": "5s"}), Options{})
	sock := r.cfg.Daemon.ControlSocket
	if st, err := (&control.Client{Socket: sock}).Status(t.Context()); err != nil || st.State != "running" {
		t.Fatalf("before the drain: %+v, %v", st, err)
	}
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":3600000}}}`)
	eventually.True(t, "the sleep to run", func() bool { return r.d.Status().Executor.Running == 1 })
	r.stop()
	eventually.True(t, "the drain to begin", func() bool { return r.d.draining.Err() != nil })
	st, err := (&control.Client{Socket: sock}).Status(t.Context())
	if err != nil || st.State != "draining" || len(st.Sessions) != 1 || st.Sessions[0].InFlight != 1 {
		t.Fatalf("while draining: %+v, %v", st, err)
	}
	p := newPipes(t)
	_, err = (&control.Client{Socket: sock}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	var refused *control.RefusedError
	if !errors.As(err, &refused) || refused.Message != "Server is shutting down (draining)" {
		t.Errorf("connect while draining: %v", err)
	}
	p.out.Close()
	if got, want := p.line(t), `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Server is shutting down"}}`; got != want {
		t.Errorf("on the passed output: %s", got)
	}
	// The grace ends: the sleep is cut off, and the session ends.
	if got := c.answer(2); !strings.Contains(got, `"Session closed by server"`) {
		t.Errorf("the sleep: %s", got)
	}
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	var unreachable *control.UnreachableError
	if _, err := (&control.Client{Socket: sock}).Status(t.Context()); !errors.As(err, &unreachable) {
		t.Errorf("after Run: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) != 0 {
		t.Errorf("left in the socket directory after a clean drain: %s", strings.Join(left, ", "))
	}
}

// A lock held on a lock file that its owner removed (a clean exit removes
// it while still holding it) is no lock: current tells, so that lockSocket
// starts over on a new file.
func TestLockOnRemovedFile(t *testing.T) {
	path := shortDir(t) + "/s.sock"
	f, err := lockSocket(path, "daemon.socket")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !current(f) {
		t.Fatal("a fresh lock is not current")
	}
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	if current(f) {
		t.Error("a lock on a removed file is current")
	}
	g, err := lockSocket(path, "daemon.socket")
	if err != nil {
		t.Fatalf("lock after the removal: %v", err)
	}
	g.Close()
}
