package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// Crash survival against a stand-in for systemd (fakesystemd_test.go): the
// daemon, under socket activation with a descriptor store, is killed with
// SIGKILL in the middle of traffic on every device kind (the Go SDK on
// the session socket, through `snodod connect`, and on a pty handed over
// by `snodod connect --handover`, 2026-07-28 with a listen stream), and
// started again with the stored descriptors. Every session goes on, with
// the same id and without a new initialize: the requests in flight at the
// kill are answered "snodod restarted; this request was lost", those sent
// while it was down are answered by the new process, the subscriptions
// and the listen stream deliver events, the terminal stays raw and is
// restored when its session ends, and a session that ends leaves the
// store.
func TestCrashSurvival(t *testing.T) {
	sd := startFakeSystemd(t, "")
	d := sd.d

	dev := goClientsOnEveryDevice(t, d, "2025-11-25", "2025-06-18", v2026)
	tty, conn := dev.tty, dev.conn
	traffic := map[string]*goTraffic{}
	for name, c := range dev.clients {
		// The sleep outlasts the crash: it is lost. A call the crashed
		// process had read and not yet admitted would be lost without an
		// answer (docs/operations.md): its worker times out.
		traffic[name] = startGoTrafficWith(t, c, name, 60000, 10*time.Second)
	}
	before := d.awaitStatus(t, "the three sessions", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 3 })
	if !eventually.Within(answerWithin, func() bool {
		st := sd.stored()
		return st["session-1"] >= 2 && st["session-2"] >= 3 && st["session-3"] >= 3
	}) {
		t.Fatalf("the descriptor store holds %v; want each session's descriptors and crash record", sd.stored())
	}
	for _, tr := range traffic {
		tr.waitEchoes(t, 20)
	}
	d.awaitStatus(t, "the long sleeps in flight", answerWithin, func(st *control.Status) bool {
		n := 0
		for _, s := range st.Sessions {
			n += s.InFlight
		}
		return n >= 3
	})

	sd.crash()

	for name, tr := range traffic {
		select {
		case err := <-tr.sleep:
			if err == nil || !strings.Contains(err.Error(), lostMessage) {
				t.Errorf("%s: the sleep in flight at the crash returned %v; want -32603 %q", name, err, lostMessage)
			}
		case <-time.After(answerWithin):
			t.Errorf("%s: the sleep in flight at the crash got no answer", name)
		}
	}
	after := d.awaitStatus(t, "the restarted daemon", answerWithin, func(st *control.Status) bool {
		return st.PID == sd.mainPID() && len(st.Sessions) == 3
	})
	survived(t, "the crash", before, after, tty, traffic)
	for name, tr := range traffic {
		tr.end(t)
		if tr.timedOut > 1 {
			t.Errorf("%s: %d calls got no answer at all", name, tr.timedOut)
		}
		t.Logf("%s: %d echoes answered, %d lost at the crash, %d read and lost unanswered", name, tr.echoCount(), tr.lost, tr.timedOut)
		tr.sameSession(t)
	}
	if r := sd.rejectedMessages(); len(r) > 0 {
		t.Errorf("notifications from a process other than the main one: %q", r)
	}

	// A session that ends leaves the store; the terminal is restored.
	if err := d.command("kill", fmt.Sprint(ptySession(after))).Run(); err != nil {
		t.Fatalf("snodod kill: %v", err)
	}
	conn.wait(t, 1)
	if !isCanonical(t, tty) {
		t.Error("the pty was not restored when its session ended after the crash")
	}
	name := fmt.Sprintf("session-%d", ptySession(after))
	if !eventually.Within(answerWithin, func() bool { return sd.stored()[name] == 0 }) {
		t.Errorf("%s is still in the store after its session ended: %v", name, sd.stored())
	}
}

// An upgrade under systemd: the old daemon makes the new one the main
// process (MAINPID=), the new one stores descriptors only from then on
// (nothing is refused for coming from another process), the sessions keep
// their crash records, and a crash of the new daemon is survived as well,
// by the sessions handed over and by one it started itself.
func TestUpgradeUnderSystemd(t *testing.T) {
	sd := startFakeSystemd(t, "")
	d := sd.d
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	c := connectGoVia(t, d, "2025-11-25", goClientOptions)
	oldPID := sd.mainPID()
	pid := d.upgrade(t)
	if got := sd.mainPID(); got != pid {
		t.Fatalf("systemd follows pid %d after the upgrade, want the new daemon's %d (old %d)", got, pid, oldPID)
	}
	if status := d.waitExit(t, answerWithin); status != 0 {
		t.Errorf("the old daemon exited %d, want 0", status)
	}
	if err := s.echo(2, "after the upgrade"); err != nil {
		t.Fatal(err)
	}
	late := mustDial(t, d.socket) // a session the new daemon starts
	if err := late.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	st := d.awaitStatus(t, "three sessions", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 3 })
	if !eventually.Within(answerWithin, func() bool {
		stored := sd.stored()
		for _, row := range st.Sessions {
			if stored[fmt.Sprintf("session-%d", row.ID)] < 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the store holds %v after the upgrade; want every session's descriptors and record", sd.stored())
	}
	if r := sd.rejectedMessages(); len(r) > 0 {
		t.Errorf("notifications from a process other than the main one: %q", r)
	}

	sd.crash()
	for i, sc := range []*sessionConn{s, late} {
		if err := sc.echo(10+i, "after the crash"); err != nil {
			t.Errorf("session %d after the crash: %v", i, err)
		}
	}
	if got := text(t, c.call(t, t.Context(), "echo", map[string]any{"text": "connect"})); got != "connect" {
		t.Errorf("echo through connect after the crash = %q", got)
	}
	if after := d.awaitStatus(t, "the sessions after the crash", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 3 }); after.PID == pid {
		t.Errorf("the status after the crash is still pid %d's", pid)
	}
}
