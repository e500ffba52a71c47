package daemon

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// successorEnv makes the test binary run refusingSuccessor instead of the
// tests: the new process of an upgrade that takes the listeners and every
// session, then refuses to serve them.
const successorEnv = "SNODOD_DAEMON_TEST_SUCCESSOR"

// refusingSuccessor speaks the new process's side of the upgrade wire up
// to the sessions: it says ready, reads each session, and once told they
// are all sent, says an error instead of adopted.
func refusingSuccessor() int {
	fd, err := strconv.Atoi(os.Getenv(UpgradeEnv))
	if err != nil {
		return 2
	}
	w, err := newWire(os.NewFile(uintptr(fd), "upgrade"))
	if err != nil {
		return 2
	}
	defer w.close()
	for {
		m, files, err := w.recv(time.Now().Add(time.Minute))
		closeFiles(files)
		if err != nil {
			return 2
		}
		switch m.Type {
		case "hello":
			if err := w.send(upgradeMsg{Type: "ready", PID: os.Getpid()}); err != nil {
				return 2
			}
		case "done":
			_ = w.send(upgradeMsg{Type: "error", Error: "the test's successor refuses the sessions"})
			return 1
		}
	}
}

// An upgrade that fails after the sessions were paused and sent (the new
// process refuses them) leaves every session served here, as if nothing
// happened: under its id and place, in the table (status, kill), the
// connect client still waiting for its end; and new sessions are accepted
// again.
func TestUpgradeFailsAfterSessionsMoved(t *testing.T) {
	t.Setenv(successorEnv, "1") // the successor is this test binary
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{Executable: os.Args[0], UpgradeArgs: []string{"-test.run=^$"}})
	ctl := &control.Client{Socket: r.cfg.Daemon.ControlSocket}

	sock := dialSession(t, r.cfg.Daemon.Socket)
	sock.initialize()
	p := newPipes(t)
	h, err := ctl.Connect(t.Context(), p.in, p.out, control.ConnectOptions{View: "", Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	p.in.Close()
	p.out.Close()
	if _, err := io.WriteString(p.toDaemon, initLine+"\n"); err != nil {
		t.Fatal(err)
	}
	if got := p.line(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Fatalf("initialize: %s", got)
	}
	before := r.d.Status().Sessions

	_, err = ctl.Upgrade(t.Context(), "")
	var refused *control.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "the test's successor refuses the sessions") {
		t.Fatalf("Upgrade: %v; want the successor's refusal", err)
	}

	if got := sock.call(2, "echo", `{"text":"socket, still here"}`); !strings.Contains(got, "socket, still here") {
		t.Errorf("the socket session after the failed upgrade: %s", got)
	}
	if _, err := io.WriteString(p.toDaemon, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"connect, still here"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if got := p.line(t); !strings.Contains(got, "connect, still here") {
		t.Errorf("the connect session after the failed upgrade: %s", got)
	}
	after := r.d.Status().Sessions
	if len(after) != 2 {
		t.Fatalf("status after the failed upgrade: %+v", after)
	}
	for i := range after {
		if a, b := after[i], before[i]; a.ID != b.ID || a.Via != b.Via || a.Kind != b.Kind {
			t.Errorf("session %d after the failed upgrade: %+v, before %+v", i, a, b)
		}
	}
	if err := r.d.sessions.check(); err != nil {
		t.Error(err)
	}
	// The resumed connect session is the table's: kill finds it, and its
	// connect client, still waiting, is told.
	if err := ctl.Kill(t.Context(), h.Session); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	var ended *control.SessionError
	if err := h.Wait(); !errors.As(err, &ended) || !strings.Contains(ended.Message, "by snodod kill") {
		t.Errorf("Wait: %v", err)
	}
	again := dialSession(t, r.cfg.Daemon.Socket)
	again.initialize()
	eventually.True(t, "two sessions", func() bool { return r.d.count() == 2 })
	if got := r.d.Status().Sessions[1].ID; got != h.Session+1 {
		t.Errorf("the next session's id %d, want %d", got, h.Session+1)
	}
}
