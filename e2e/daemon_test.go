package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// These tests run `snodod serve --demo`, one daemon per test, and reach it
// the ways a client does: the session socket, `snodod connect` on pipes and
// on a pty, and `snodod status`. Each stops its daemon with SIGTERM and
// checks that it exits 0 (TestDaemonCrash kills it), and that the race
// detector reported nothing.

// TestDaemonManySessions: 200 sessions at once on the session socket, each
// making several calls in its own era, all answered.
func TestDaemonManySessions(t *testing.T) {
	d := startDaemon(t, "", nil)
	const sessions, calls = 200, 4
	versions := []string{"2025-06-18", "2025-11-25"}
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, sessions)
	ready.Add(sessions)
	for i := range sessions {
		done.Go(func() {
			if err := manyCallsSession(d.socket, i, versions[i%len(versions)], calls, ready.Done, start); err != nil {
				errs <- fmt.Errorf("session %d: %w", i, err)
			}
		})
	}
	// Every session is open and initialized before any of them calls.
	ready.Wait()
	if st, err := d.status(t.Context()); err != nil || len(st.Sessions) != sessions {
		n := -1
		if st != nil {
			n = len(st.Sessions)
		}
		t.Errorf("status: %d sessions (%v), want %d", n, err, sessions)
	}
	close(start)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	d.awaitStatus(t, "every session ended", 10*time.Second, func(st *control.Status) bool { return len(st.Sessions) == 0 })
	d.stop(t)
}

// manyCallsSession is one session of TestDaemonManySessions: it
// initializes at version, calls ready, waits for start, then makes that
// many echo calls with a 2026 tools/list among them, and ends its input.
func manyCallsSession(socket string, i int, version string, calls int, ready func(), start <-chan struct{}) error {
	s, err := dialSession(socket)
	if err != nil {
		ready()
		return err
	}
	defer s.Close()
	err = s.initialize(version)
	ready()
	if err != nil {
		return err
	}
	<-start
	for j := 1; j <= calls; j++ {
		if err := s.echo(j, fmt.Sprintf("session %d call %d", i, j)); err != nil {
			return err
		}
		if j == calls/2 {
			if err := s.send(tools2026Line(100)); err != nil {
				return err
			}
			r, err := s.answer("100", answerWithin)
			if err != nil {
				return err
			}
			var res struct {
				Tools      []struct{ Name string }
				ResultType string
			}
			if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.ResultType != "complete" ||
				!slices.ContainsFunc(res.Tools, func(tool struct{ Name string }) bool { return tool.Name == "echo" }) {
				return fmt.Errorf("2026 tools/list: result %.300s, error %+v", r.Result, r.Error)
			}
		}
	}
	// End of input ends the session: nothing more is written.
	if err := s.c.CloseWrite(); err != nil {
		return err
	}
	if _, line, err := s.next(answerWithin); !errors.Is(err, io.EOF) || len(line) > 0 {
		return fmt.Errorf("after end of input: %q, %v; want end of file", line, err)
	}
	return nil
}

// TestDaemonPTY hands a pty over with `snodod connect --handover`, the
// pty left in canonical mode by the test: the daemon makes it raw, so a
// 1,000,000-byte request line passes the line discipline's 4,095-byte
// limit, no input is echoed and no "\r" is added to the output; closing
// the master ends the session. A second pty shows the settings restored
// when its session ends (a pty whose master was closed refuses every
// ioctl, so the first cannot show it).
func TestDaemonPTY(t *testing.T) {
	d := startDaemon(t, "", nil)

	master, tty := openPTY(t)
	if !isCanonical(t, tty) {
		t.Fatal("a new pty is not in canonical mode with echo")
	}
	conn := startConnectOn(t, d, tty)
	if !eventually.Within(answerWithin, func() bool { return isRaw(t, tty) }) {
		t.Fatal("the handed-over pty was not put into raw mode")
	}
	d.awaitStatus(t, "the pty session", answerWithin, func(st *control.Status) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].Kind == "pty"
	})
	lines := readLines(master)
	write := func(s string) {
		t.Helper()
		_ = master.SetWriteDeadline(time.Now().Add(answerWithin))
		if _, err := io.WriteString(master, s); err != nil {
			t.Fatalf("write to the pty: %v", err)
		}
	}

	write(initializeLine(1, "2025-06-18") + "\n" + initializedLine + "\n")
	echoReq, text := paddedEcho(2, 1_000_000)
	if len(echoReq)+1 != 1_000_000 {
		t.Fatalf("the request line is %d bytes", len(echoReq)+1)
	}
	write(echoReq + "\n")
	write(callLine(3, "big", `{"bytes":1000000}`) + "\n")

	got := map[string]reply{}
	for len(got) < 3 {
		var line []byte
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the pty ended after %d answers", len(got))
			}
			line = l
		case <-time.After(answerWithin):
			t.Fatalf("%d answers within %v, want 3", len(got), answerWithin)
		}
		if i := bytes.IndexByte(line, '\r'); i >= 0 {
			t.Errorf("a line of %d bytes has a \\r at byte %d: output processing is on", len(line), i)
		}
		if bytes.Contains(line, []byte(`"method":"tools/call"`)) || bytes.Contains(line, []byte(`"method":"initialize"`)) {
			t.Fatalf("the pty echoed a request: %.200q", line)
		}
		var r reply
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("a line of %d bytes does not decode: %v: %.200q", len(line), err, line)
		}
		if r.Method != "" {
			t.Fatalf("unexpected notification %.200s", line)
		}
		got[string(r.ID)] = r
	}
	if got["1"].Error != nil {
		t.Errorf("initialize: %+v", got["1"].Error)
	}
	if echo, err := toolText(got["2"]); err != nil || echo != text {
		t.Errorf("echo of %d bytes returned %d bytes (%v); equal: %v", len(text), len(echo), err, echo == text)
	}
	if big, err := toolText(got["3"]); err != nil || len(big) != 1_000_000 || strings.Trim(big, big[:1]) != "" {
		t.Errorf("big returned %d bytes (%v), want 1000000", len(big), err)
	}

	// Closing the master hangs the pty up: end of input.
	master.Close()
	for range lines {
		t.Error("a line after the master was closed")
	}
	conn.wait(t, 0)
	d.awaitStatus(t, "the pty session ended", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 0 })

	// A session that ends while the pty lives (here, by the daemon's
	// drain) leaves the pty as it found it, by the time connect exits: a
	// shell that waited for connect reads its terminal next.
	master2, tty2 := openPTY(t)
	conn2 := startConnectOn(t, d, tty2)
	if !eventually.Within(answerWithin, func() bool { return isRaw(t, tty2) }) {
		t.Fatal("the second pty was not put into raw mode")
	}
	lines2 := readLines(master2)
	_ = master2.SetWriteDeadline(time.Now().Add(answerWithin))
	if _, err := io.WriteString(master2, initializeLine(1, "2025-11-25")+"\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-lines2:
		if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"`)) {
			t.Errorf("initialize on the second pty: %.200s", line)
		}
	case <-time.After(answerWithin):
		t.Fatal("no answer on the second pty")
	}
	d.signal(t, syscall.SIGTERM)
	conn2.wait(t, 0)
	if !isCanonical(t, tty2) {
		t.Error("once its session ended, the pty is not back in canonical mode with echo")
	}
	if status := d.waitExit(t, 20*time.Second); status != 0 {
		t.Errorf("the daemon exited with status %d after SIGTERM, want 0", status)
	}
	master2.Close()
	for range lines2 {
	}
}

// TestDaemonConnectGoSDK: the official Go SDK client starts `snodod
// connect` as its server command, as an MCP client's configuration says,
// at each protocol version.
func TestDaemonConnectGoSDK(t *testing.T) {
	d := startDaemon(t, "", nil)
	t.Run("versions", func(t *testing.T) {
		for _, version := range []string{"2025-06-18", "2025-11-25", v2026} {
			t.Run(version, func(t *testing.T) {
				t.Parallel()
				c := connectGoVia(t, d, version)
				ctx := t.Context()
				if got := c.cs.InitializeResult(); got == nil || got.ProtocolVersion != version {
					t.Fatalf("negotiated %+v, want %s", got, version)
				}
				list, err := c.cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(list.Tools, func(tool *mcp.Tool) bool { return tool.Name == "echo" }) {
					t.Errorf("tools/list lacks echo: %d tools", len(list.Tools))
				}
				if got := text(t, c.call(t, ctx, "echo", map[string]any{"text": "via connect"})); got != "via connect" {
					t.Errorf("echo = %q", got)
				}
				res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Contents) != 1 || res.Contents[0].Text != "This is the content of the static text resource." {
					t.Errorf("read test://static-text = %+v", res.Contents)
				}
				testGoCancel(t, c)
			})
		}
	})
	d.awaitStatus(t, "every session ended", 10*time.Second, func(st *control.Status) bool { return len(st.Sessions) == 0 })
	d.stop(t)
}

// TestDaemonRestart: the fault hook makes a session's coordinator fail
// while a call runs. The call is answered -32603, and the client goes on
// on the same connection, in the version it negotiated.
func TestDaemonRestart(t *testing.T) {
	d := startDaemon(t, "", []string{"SNODOD_TEST_FAULTS=1"})
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := s.send(callLine(2, "sleep", `{"ms":5000}`)); err != nil {
		t.Fatal(err)
	}
	st := d.awaitStatus(t, "the sleep in flight", answerWithin, func(st *control.Status) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].InFlight == 1
	})
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	if err := d.fault(ctx, st.Sessions[0].ID); err != nil {
		t.Fatalf("fault: %v", err)
	}
	r, err := s.answer("2", answerWithin)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Code != -32603 || r.Error.Message != "Session closed by server" {
		t.Fatalf("the call in flight got result %s, error %+v; want -32603 Session closed by server", r.Result, r.Error)
	}
	if err := s.echo(3, "after the restart"); err != nil {
		t.Fatal(err)
	}
	// Invalid arguments are -32602 in 2025-06-18 (an isError result in
	// 2025-11-25): the negotiated version survived the restart.
	if err := s.send(callLine(4, "echo", `{"text":5}`)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.answer("4", answerWithin); err != nil || r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("invalid arguments after the restart: %s, %+v, %v; want -32602", r.Result, r.Error, err)
	}
	got := d.statusJSON(t)
	if len(got.Sessions) != 1 || got.Sessions[0].Restarts != 1 || got.Sessions[0].Version != "2025-06-18" {
		t.Errorf("snodod status --json: %+v; want one 2025-06-18 session with 1 restart", got.Sessions)
	}

	// A fault while many requests are on their way: the restarted
	// instance reads on where the failed one stopped, so each request is
	// answered once, either by its result or, if it was in flight, -32603.
	const first, n = 100, 200 // n within executor.max_concurrency + max_queue (288)
	var batch []string
	for id := first; id < first+n; id++ {
		batch = append(batch, echoLine(id, fmt.Sprint("batch ", id)))
	}
	if err := s.send(batch...); err != nil {
		t.Fatal(err)
	}
	if err := d.fault(ctx, st.Sessions[0].ID); err != nil {
		t.Fatalf("second fault: %v", err)
	}
	answers := map[int]int{}
	closed := 0
	for range n {
		r, line, err := s.next(answerWithin)
		if err != nil {
			t.Fatalf("after %d answers to the batch: %v", len(answers), err)
		}
		var id int
		if json.Unmarshal(r.ID, &id) != nil || id < first || id >= first+n {
			t.Fatalf("unexpected line %.200s", line)
		}
		answers[id]++
		if r.Error != nil && r.Error.Code == -32603 && r.Error.Message == "Session closed by server" {
			closed++
		} else if got, err := toolText(r); err != nil || got != fmt.Sprint("batch ", id) {
			t.Errorf("echo %d = %q, %v", id, got, err)
		}
	}
	if len(answers) != n {
		t.Errorf("%d of the %d requests were answered", len(answers), n)
	}
	t.Logf("%d of the batch's %d requests were in flight at the fault", closed, n)
	d.awaitStatus(t, "the second restart", answerWithin, func(st *control.Status) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].Restarts == 2
	})
	if err := s.echo(3, "after the second restart"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	d.stop(t)
}

// TestDaemonSlowReader: a client that stops reading is cut off once a
// frame misses session.write_timeout, while other sessions go on.
func TestDaemonSlowReader(t *testing.T) {
	d := startDaemon(t, "[session]\nwrite_timeout = \"500ms\"\n", nil)
	slow := mustDial(t, d.socket)
	if err := slow.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	slowID := d.awaitStatus(t, "the slow session", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 1 }).Sessions[0].ID

	const others = 5
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var answered [others]atomic.Int64
	errs := make(chan error, others)
	for i := range others {
		s := mustDial(t, d.socket)
		if err := s.initialize("2025-06-18"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for id := 1; ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.echo(id, fmt.Sprintf("other %d call %d", i, id)); err != nil {
					errs <- fmt.Errorf("session %d: %w", i, err)
					return
				}
				answered[i].Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		})
	}

	var lines []string
	for id := 2; id < 6; id++ {
		lines = append(lines, callLine(id, "big", `{"bytes":4000000}`))
	}
	if err := slow.send(lines...); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	gone := eventually.Within(10*time.Second, func() bool {
		st, err := d.status(t.Context())
		return err == nil && !slices.ContainsFunc(st.Sessions, func(s control.Session) bool { return s.ID == slowID })
	})
	t.Logf("the slow reader was cut off after %v", time.Since(start).Round(time.Millisecond))
	if !gone {
		t.Error("the slow reader's session still runs 10 s after it stopped reading")
	} else if err := slow.drainToEOF(10 * time.Second); err != nil {
		t.Errorf("the slow reader's connection: %v, want end of file", err)
	}
	time.Sleep(300 * time.Millisecond) // the others go on after it
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range others {
		if answered[i].Load() == 0 {
			t.Errorf("session %d got no answer", i)
		}
	}
	st := d.statusJSON(t)
	if len(st.Sessions) != others {
		t.Errorf("%d sessions after the slow one ended, want %d", len(st.Sessions), others)
	}
	d.stop(t)
}

// TestDaemonDrain: SIGTERM during a 1 s call: the call's result is
// delivered, then the daemon exits 0.
func TestDaemonDrain(t *testing.T) {
	const grace = 5 * time.Second
	d := startDaemon(t, "", nil, "--shutdown-grace", grace.String())
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	if err := s.send(callLine(2, "sleep", `{"ms":1000}`)); err != nil {
		t.Fatal(err)
	}
	d.awaitStatus(t, "the sleep in flight", answerWithin, func(st *control.Status) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].InFlight == 1
	})
	start := time.Now()
	d.signal(t, syscall.SIGTERM)
	r, err := s.answer("2", grace+5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := toolText(r); err != nil || got != "done" {
		t.Errorf("the sleep during the drain = %q, %v; want done", got, err)
	}
	// The daemon exits within the grace, plus a margin for its bookkeeping
	// and a loaded machine, counted from the signal.
	if status := d.waitExit(t, time.Until(start.Add(grace+5*time.Second))); status != 0 {
		t.Errorf("the daemon exited %d after the drain, want 0", status)
	}
	t.Logf("drained in %v", time.Since(start).Round(time.Millisecond))
	if err := s.drainToEOF(5 * time.Second); err != nil {
		t.Errorf("the session's connection after the drain: %v, want end of file", err)
	}
}

// TestDaemonCrash: kill -9 of the daemon during a session: `snodod
// connect` exits non-zero with one line saying what happened.
func TestDaemonCrash(t *testing.T) {
	d := startDaemon(t, "", nil)
	cmd := d.command("connect")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	conn := startConnect(t, cmd)
	defer stdin.Close()
	lines := readLines(stdout)
	if _, err := io.WriteString(stdin, initializeLine(1, "2025-06-18")+"\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-lines:
		if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":1,"result":`)) {
			t.Fatalf("initialize through connect: %.200s", line)
		}
	case <-time.After(answerWithin):
		t.Fatalf("no answer through connect; its standard error:\n%s", conn.stderr.String())
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, answerWithin)
	conn.wait(t, 1)
	out := conn.stderr.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") ||
		!strings.HasPrefix(out, "snodod connect: ") || !strings.Contains(out, d.control) || !strings.Contains(out, "die") {
		t.Errorf("snodod connect's standard error is %q; want one line saying the daemon at %s died", out, d.control)
	}
	stdin.Close()
	for range lines {
	}
}

// TestDaemonReload: SIGHUP with a broken file keeps the running
// configuration and lists every problem; with a good one, new sessions get
// the new limit and running ones keep theirs.
func TestDaemonReload(t *testing.T) {
	d := startDaemon(t, "[session]\nmax_line_bytes = 1000\n", nil)
	line2000, text := paddedEcho(7, 2000)
	const refused1000 = "Message exceeds the 1000-byte line limit"
	// refusedThenServed sends a 2,000-byte line to s and checks it is
	// refused with the 1000-byte limit, and that s then goes on.
	refusedThenServed := func(s *sessionConn, what string) {
		t.Helper()
		if err := s.send(line2000); err != nil {
			t.Fatal(err)
		}
		r, err := s.answer("null", answerWithin)
		if err != nil || r.Error == nil || r.Error.Code != -32600 || r.Error.Message != refused1000 {
			t.Errorf("%s: a 2,000-byte line got %+v (%v); want -32600 %s", what, r.Error, err, refused1000)
		}
		if err := s.echo(8, "short"); err != nil {
			t.Errorf("%s: after the refusal: %v", what, err)
		}
	}
	before := mustDial(t, d.socket)
	if err := before.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	refusedThenServed(before, "the first session")

	d.writeConfig(t, "[session]\nmax_line_bytes = 5000\nwrite_timout = \"1s\"\nrequest_timeout = \"soon\"\n")
	d.signal(t, syscall.SIGHUP)
	problems := []string{
		`session.request_timeout: must be a positive duration, got \"soon\"`,
		`unknown key \"session.write_timout\"; did you mean \"session.write_timeout\"?`,
	}
	if !eventually.Within(answerWithin, func() bool {
		log := d.stderr.String()
		for _, p := range problems {
			if !strings.Contains(log, p) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the log does not list %q after a broken reload", problems)
	}
	for _, l := range strings.Split(d.stderr.String(), "\n") {
		if (strings.Contains(l, "session.request_timeout") || strings.Contains(l, "session.write_timout")) && !strings.Contains(l, "reload refused") {
			t.Errorf("a problem is logged without saying the reload was refused: %s", l)
		}
	}
	broken := mustDial(t, d.socket)
	if err := broken.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	refusedThenServed(broken, "a session after the broken reload")

	d.writeConfig(t, "[session]\nmax_line_bytes = 5000\n")
	d.signal(t, syscall.SIGHUP)
	if !eventually.Within(answerWithin, func() bool { return strings.Contains(d.stderr.String(), "configuration reloaded") }) {
		t.Fatal("no reload after SIGHUP with a good file")
	}
	after := mustDial(t, d.socket)
	if err := after.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := after.send(line2000); err != nil {
		t.Fatal(err)
	}
	if r, err := after.answer("7", answerWithin); err != nil {
		t.Errorf("a new session after the reload: %v", err)
	} else if got, err := toolText(r); err != nil || got != text {
		t.Errorf("a new session after the reload: echo of %d bytes = %d bytes, %v", len(text), len(got), err)
	}
	refusedThenServed(before, "the first session, after the reload")
	refusedThenServed(broken, "the session of the broken reload, after the reload")
	before.Close()
	broken.Close()
	after.Close()
	d.stop(t)
}
