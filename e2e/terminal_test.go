package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// Terminals handed to the daemon and to `snodod stdio`: who gives them back,
// in which mode, and what a person at one is told.

// nextLine returns the next line from lines, failing after answerWithin.
func nextLine(t *testing.T, lines <-chan []byte, what string) []byte {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s: the terminal ended", what)
		}
		return l
	case <-time.After(answerWithin):
		t.Fatalf("%s: no line within %v", what, answerWithin)
	}
	return nil
}

// writeTo writes s to a pty's master.
func writeTo(t *testing.T, master *os.File, s string) {
	t.Helper()
	_ = master.SetWriteDeadline(time.Now().Add(answerWithin))
	if _, err := io.WriteString(master, s); err != nil {
		t.Fatalf("write to the pty: %v", err)
	}
}

// handOverSleeping hands a pty over with `snodod connect --handover`,
// initializes the session and starts a sleep of an hour on it.
func handOverSleeping(t *testing.T, d *daemonProc) (master, tty *os.File, lines <-chan []byte, conn *connectProc, id uint64) {
	t.Helper()
	master, tty = openPTY(t)
	conn = startConnectOn(t, d, tty)
	if !eventually.Within(answerWithin, func() bool { return isRaw(t, tty) }) {
		t.Fatal("the handed-over pty was not put into raw mode")
	}
	lines = readLines(master)
	writeTo(t, master, initializeLine(1, "2025-06-18")+"\n"+initializedLine+"\n"+callLine(2, "sleep", `{"ms":3600000}`)+"\n")
	if l := nextLine(t, lines, "initialize"); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":1,"result":`)) {
		t.Fatalf("initialize: %.200s", l)
	}
	st := d.awaitStatus(t, "the sleep to run", answerWithin, func(st *control.Status) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].InFlight == 1
	})
	return master, tty, lines, conn, st.Sessions[0].ID
}

// TestHandoverConnectKilled: when the connect process that handed a
// terminal over is killed, the daemon ends the session at once (its
// request answered, whatever the grace) and gives the terminal back in the
// mode it found it (docs/architecture.md §3.2).
func TestHandoverConnectKilled(t *testing.T) {
	d := startDaemon(t, "", nil, "--shutdown-grace", "1h")
	_, tty, lines, conn, _ := handOverSleeping(t, d)
	if err := conn.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if l := nextLine(t, lines, "the sleep"); !bytes.Contains(l, []byte(`"id":2,"error":{"code":-32603,"message":"Session closed by server"}`)) {
		t.Errorf("the sleep: %.200s", l)
	}
	d.awaitStatus(t, "the session to end", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 0 })
	if !isCanonical(t, tty) {
		t.Error("the terminal is not back in canonical mode with echo")
	}
	if log := d.stderr.String(); !strings.Contains(log, `msg="session ended" session=1 kind=pty`) || !strings.Contains(log, `reason=killed error="session killed: its snodod connect process exited"`) {
		t.Errorf("the daemon's log lacks the end of the session:\n%s", log)
	}
}

// TestKillCommandRestoresTerminal: `snodod kill ID` ends the session, the
// terminal is restored, and the connect that waited exits 1 saying so.
func TestKillCommandRestoresTerminal(t *testing.T) {
	d := startDaemon(t, "", nil, "--shutdown-grace", "1h")
	_, tty, lines, conn, id := handOverSleeping(t, d)
	kill := d.command("kill", strconv.FormatUint(id, 10))
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("snodod kill: %v\n%s", err, out)
	}
	if !isCanonical(t, tty) {
		t.Error("after snodod kill, the terminal is not back in canonical mode with echo")
	}
	nextLine(t, lines, "the sleep's answer")
	conn.wait(t, 1)
	if got := conn.stderr.String(); !strings.Contains(got, "session killed: by snodod kill") {
		t.Errorf("connect said %q", got)
	}
}

// onControllingTerminal makes tty the controlling terminal of cmd, in a
// session of its own, as a shell does for the command a person types.
func onControllingTerminal(cmd *exec.Cmd, tty *os.File) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}

// TestConnectAtOwnTerminal: typed at a person's own terminal, connect
// relays and says so in one line; forced to hand the
// terminal over, it says how to leave.
func TestConnectAtOwnTerminal(t *testing.T) {
	d := startDaemon(t, "", nil)

	master, tty := openPTY(t)
	relay := d.command("connect")
	onControllingTerminal(relay, tty)
	proc := startConnect(t, relay)
	lines := readLines(master)
	if l := nextLine(t, lines, "the relay's greeting"); !strings.HasPrefix(string(l), "connected to snodod at "+d.socket+" (relay); type JSON-RPC lines, Ctrl-D ends\r\n") {
		t.Errorf("relay greeting %q", l)
	}
	writeTo(t, master, initializeLine(1, "2025-06-18")+"\n")
	nextLine(t, lines, "the echo of the request") // the terminal echoes: canonical mode
	if l := nextLine(t, lines, "initialize"); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":1,"result":`)) {
		t.Fatalf("initialize: %.200s", l)
	}
	writeTo(t, master, "\x04") // Ctrl-D: end of input
	proc.wait(t, 0)

	master2, tty2 := openPTY(t)
	handover := d.command("connect", "--handover")
	onControllingTerminal(handover, tty2)
	proc2 := startConnect(t, handover)
	lines2 := readLines(master2)
	l := nextLine(t, lines2, "the hand-over's notice")
	if !strings.HasPrefix(string(l), "snodod connect: session 2 has this terminal in raw mode: every key, Ctrl-C and Ctrl-D included, goes to the daemon; to leave, run 'snodod kill 2' in another terminal, or kill this process (pid ") ||
		!strings.HasSuffix(string(l), ")\r\n") {
		t.Errorf("hand-over notice %q", l)
	}
	if out, err := d.command("kill", "2").CombinedOutput(); err != nil {
		t.Fatalf("snodod kill 2: %v\n%s", err, out)
	}
	proc2.wait(t, 1)
	if !isCanonical(t, tty2) {
		t.Error("after the kill, the terminal is not back in canonical mode")
	}
}

// startStdioOn runs `snodod stdio --demo args...` with tty as its standard
// input and output; its standard error is stderr, or kept in a buffer.
func startStdioOn(t *testing.T, tty *os.File, stderr io.Writer, args ...string) (*exec.Cmd, *syncBuffer, chan struct{}) {
	t.Helper()
	cmd := serverCommand(t)
	cmd.Args = append(cmd.Args, args...)
	cmd.Stdin, cmd.Stdout = tty, tty
	buf, _ := cmd.Stderr.(*syncBuffer)
	if stderr != nil {
		cmd.Stderr = stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(watch(cmd, exited))
	return cmd, buf, exited
}

// stopStdio sends SIGTERM and expects exit status 0.
func stopStdio(t *testing.T, cmd *exec.Cmd, exited chan struct{}) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(answerWithin):
		t.Fatal("snodod stdio did not exit after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("snodod stdio exited %d after SIGTERM, want 0", code)
	}
}

// TestStdioTerminal: `snodod stdio` on a terminal puts it into raw mode
// for the session, so a line longer than the line discipline's 4,095
// bytes passes unechoed, and restores it at exit; a person is told which
// mode is on; --cooked keeps the line discipline and says lines will be
// cut.
func TestStdioTerminal(t *testing.T) {
	t.Run("raw", func(t *testing.T) {
		master, tty := openPTY(t)
		cmd, stderr, exited := startStdioOn(t, tty, nil)
		if !eventually.Within(answerWithin, func() bool { return isRaw(t, tty) }) {
			t.Fatal("the terminal was not put into raw mode")
		}
		lines := readLines(master)
		echo, text := paddedEcho(2, 10_000)
		writeTo(t, master, initializeLine(1, "2025-06-18")+"\n"+echo+"\n")
		if l := nextLine(t, lines, "initialize"); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":1,"result":`)) {
			t.Fatalf("initialize (or an echo of it): %.200s", l)
		}
		var r reply
		l := nextLine(t, lines, "the long echo")
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%v: %.200s", err, l)
		}
		if got, err := toolText(r); err != nil || got != text {
			t.Errorf("echo of %d bytes returned %d bytes (%v)", len(text), len(got), err)
		}
		stopStdio(t, cmd, exited)
		if !isCanonical(t, tty) {
			t.Error("at exit, the terminal is not back in canonical mode with echo")
		}
		if strings.Contains(stderr.String(), "raw mode") {
			t.Errorf("the mode line went to a standard error that is no terminal:\n%s", stderr.String())
		}
	})
	t.Run("raw, told", func(t *testing.T) {
		master, tty := openPTY(t)
		cmd, _, exited := startStdioOn(t, tty, tty)
		lines := readLines(master)
		if l := nextLine(t, lines, "the mode line"); !bytes.HasPrefix(l, []byte("snodod stdio: raw mode: lines of any length, but no echo or line editing, and Enter, Ctrl-C and Ctrl-D are plain bytes; to type requests by hand, run with --cooked; to end, close the terminal or run 'kill ")) {
			t.Errorf("mode line %q", l)
		}
		// Signals are handled once it serves (it logs so, here too).
		for !bytes.Contains(nextLine(t, lines, "the log line"), []byte("serving one MCP session")) {
		}
		stopStdio(t, cmd, exited)
		if !isCanonical(t, tty) {
			t.Error("at exit, the terminal is not back in canonical mode with echo")
		}
	})
	t.Run("cooked", func(t *testing.T) {
		master, tty := openPTY(t)
		cmd, stderr, exited := startStdioOn(t, tty, nil, "--cooked")
		want := "snodod stdio: cooked mode (--cooked): the terminal keeps its echo and line editing, so a line longer than 4,095 bytes will be cut"
		if !eventually.Within(answerWithin, func() bool { return strings.Contains(stderr.String(), want) }) {
			t.Fatalf("no cooked-mode line:\n%s", stderr.String())
		}
		if !isCanonical(t, tty) {
			t.Error("--cooked changed the terminal's mode")
		}
		lines := readLines(master)
		writeTo(t, master, initializeLine(1, "2025-06-18")+"\n")
		nextLine(t, lines, "the terminal's echo of the request")
		if l := nextLine(t, lines, "initialize"); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":1,"result":`)) {
			t.Fatalf("initialize: %.200s", l)
		}
		stopStdio(t, cmd, exited)
	})
}
