package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// An upgrade (`snodod upgrade`) in the middle of continuous traffic on
// every device kind, with the official clients: the Go SDK on the session
// socket (2026-07-28, with a listen stream), through `snodod connect`
// (pipes handed over, 2025-06-18) and on a pty handed over by `snodod
// connect --handover` (2025-11-25), and the TypeScript SDK through
// `snodod connect` (its pipes) and `snodod connect --relay` (a socket). Each has pipelined calls running, a long sleep with
// progress, and a subscription; across the upgrade no call fails, none is
// answered twice, the sleep finishes, no client initializes again, the
// sessions keep their ids, and events reach every client afterwards.
func TestUpgrade(t *testing.T) {
	d := startDaemon(t, "", nil)
	ts := startTSUpgradeClient(t, d, "2025-11-25")
	tsRelay := startTSUpgradeClient(t, d, "2025-06-18", "relay")

	dev := goClientsOnEveryDevice(t, d, v2026, "2025-06-18", "2025-11-25")
	tty, conn := dev.tty, dev.conn
	traffic := map[string]*goTraffic{}
	for name, c := range dev.clients {
		traffic[name] = startGoTraffic(t, c, name)
	}
	ts.waitReady(t)
	tsRelay.waitReady(t)
	before := d.awaitStatus(t, "the five sessions", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 5 })
	for _, tr := range traffic {
		tr.waitEchoes(t, 20)
	}

	pid := d.upgrade(t)
	if pid == before.PID {
		t.Fatalf("the upgrade kept pid %d", pid)
	}
	if status := d.waitExit(t, answerWithin); status != 0 {
		t.Errorf("the old daemon exited %d after the upgrade, want 0", status)
	}
	ts.upgraded(t)
	tsRelay.upgraded(t)
	after := d.awaitStatus(t, "the new daemon", answerWithin, func(st *control.Status) bool { return st.PID == pid })
	survived(t, "the upgrade", before, after, tty, traffic)
	for _, tr := range traffic {
		tr.stop(t)
		tr.sameSession(t)
	}
	echoes := map[string]int{}
	for name, tc := range map[string]*tsUpgradeClient{"TypeScript, connect": ts, "TypeScript, relay": tsRelay} {
		sum := tc.finish(t)
		if len(sum.Errors) > 0 || sum.Sleep != "done" || sum.Progress < 2 || !sum.Updated || !sum.ToolsChanged ||
			sum.Initializes != 1 || sum.ExitCode == nil || *sum.ExitCode != 0 || sum.Echoes < 40 {
			t.Errorf("%s: %+v", name, sum)
		}
		echoes[name] = sum.Echoes
	}
	for name, tr := range traffic {
		echoes["Go, "+name] = tr.echoCount()
	}
	t.Logf("echoes answered: %v", echoes)
	// The new daemon restores the terminal when the session ends.
	if err := d.command("kill", fmt.Sprint(ptySession(before))).Run(); err != nil {
		t.Fatalf("snodod kill: %v", err)
	}
	conn.wait(t, 1)
	if !isCanonical(t, tty) {
		t.Error("the pty was not restored when its session ended after the upgrade")
	}
	d.stopSuccessor(t)
}

// A failed upgrade leaves the daemon serving as if nothing happened: a
// binary that exits, and the same binary refusing its configuration. Once
// the configuration is fixed, the upgrade succeeds.
func TestUpgradeFails(t *testing.T) {
	d := startDaemon(t, "", nil)
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		before func()
		args   []string
		want   string
	}{
		{"a binary that exits", nil, []string{"--binary", "/bin/false"}, "exited before it served"},
		{"a configuration the new binary refuses", func() { d.writeConfig(t, "[daemon]\nmax_sessions = -1\n") }, nil,
			"refused the configuration"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			cmd := d.command(append([]string{"upgrade"}, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "upgrade failed") || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("snodod upgrade: %v, exit %d, stderr %q; want 1 and %q", err, cmd.ProcessState.ExitCode(), stderr.String(), tc.want)
			}
			if err := s.echo(10+i, "still served"); err != nil {
				t.Fatalf("after the failed upgrade: %v", err)
			}
			// New sessions are accepted again.
			s2 := mustDial(t, d.socket)
			if err := s2.initialize("2025-11-25"); err != nil {
				t.Fatal(err)
			}
			s2.Close()
		})
	}
	if err := os.Remove(d.config); err != nil {
		t.Fatal(err)
	}
	d.upgrade(t)
	if err := s.echo(20, "after the upgrade"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	d.stopSuccessor(t)
}

// An upgrade with a hosted server: a relayed call in flight is answered
// by the old daemon's instance (its session's hand-over waits for it,
// nothing is killed mid-call); the server, then idle, is handed over: the
// new daemon serves the same process, initialized once, with its memory
// of the call before, no restart counted, nothing killed as an orphan.
func TestUpgradeUpstream(t *testing.T) {
	fake := fakeUpstream(t)
	d := startDaemon(t, fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nstart = \"eager\"\n", fake), nil)
	st := d.awaitStatus(t, "the upstream ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready" && st.Upstreams[0].PID > 0
	})
	oldChild := st.Upstreams[0].PID
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	if err := s.send(callLine(1, "fake__slow", `{"ms":1500}`)); err != nil {
		t.Fatal(err)
	}
	d.awaitStatus(t, "the relayed call in flight", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 1 && st.Upstreams[0].InFlight == 1
	})
	upgraded := make(chan int, 1)
	go func() { upgraded <- d.upgrade(t) }()
	r, err := s.answer("1", answerWithin)
	if err != nil || r.Error != nil || !strings.Contains(string(r.Result), `"ms":1500`) {
		t.Fatalf("the relayed call across the upgrade: %s, %+v, %v", r.Result, r.Error, err)
	}
	pid := <-upgraded
	if !waitGone(d.cmd.Process.Pid, answerWithin) {
		t.Fatalf("the old daemon (pid %d) did not exit after the upgrade", d.cmd.Process.Pid)
	}
	if err := s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); err != nil {
		t.Fatal(err)
	}
	if r, err := s.answer("2", answerWithin); err != nil || !strings.Contains(string(r.Result), `"name":"fake__echo"`) {
		t.Fatalf("tools/list after the upgrade: %.300s, %v", r.Result, err)
	}
	if err := s.send(callLine(3, "fake__echo", `{"x":3}`)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.answer("3", answerWithin); err != nil || r.Error != nil || !strings.Contains(string(r.Result), `"x":3`) {
		t.Fatalf("a relayed call after the upgrade: %s, %+v, %v", r.Result, r.Error, err)
	}
	st = d.awaitStatus(t, "the new daemon's upstream", answerWithin, func(st *control.Status) bool {
		return st.PID == pid && len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready"
	})
	// The server was handed over, not restarted: the same process, which
	// saw one initialize and the call from before the upgrade.
	if st.Upstreams[0].PID != oldChild || st.Upstreams[0].Restarts != 0 {
		t.Errorf("after the upgrade the upstream is pid %d with %d restarts; want the same process (%d), none", st.Upstreams[0].PID, st.Upstreams[0].Restarts, oldChild)
	}
	if err := s.send(callLine(4, "fake__history", `{}`)); err != nil {
		t.Fatal(err)
	}
	r, err = s.answer("4", answerWithin)
	if err != nil || r.Error != nil {
		t.Fatalf("history after the upgrade: %+v, %v", r, err)
	}
	if inits, slow := strings.Count(string(r.Result), `"method":"initialize"`), strings.Count(string(r.Result), `"tool":"slow"`); inits != 1 || slow != 1 {
		t.Errorf("the server handed over saw %d initialize and %d slow call, want 1 and 1: %.500s", inits, slow, r.Result)
	}
	if strings.Contains(d.stderr.String(), "killed upstream processes a previous daemon left running") {
		t.Errorf("the new daemon killed upstream processes as orphans:\n%s", d.stderr.String())
	}
	s.Close()
	d.stopSuccessor(t)
}

// upgrade runs `snodod upgrade`, expects it to succeed, and returns the
// new daemon's pid, which the test's cleanup stops if it still runs.
func (d *daemonProc) upgrade(t *testing.T, args ...string) int {
	t.Helper()
	cmd := d.command(append([]string{"upgrade"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("snodod upgrade: %v\n%s", err, stderr.String())
	}
	var pid int
	if _, err := fmt.Sscanf(string(out), "upgraded: the daemon is now pid %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("snodod upgrade printed %q", out)
	}
	d.successor = pid
	return pid
}

// stopSuccessor drains the daemon an upgrade started (SIGTERM) and waits
// until it is gone.
func (d *daemonProc) stopSuccessor(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(d.successor, syscall.SIGTERM); err != nil {
		t.Fatalf("signal the new daemon: %v", err)
	}
	if !waitGone(d.successor, 20*time.Second) {
		t.Fatalf("the new daemon (pid %d) did not exit after SIGTERM", d.successor)
	}
	d.successor = 0
}

// goDevices are Go SDK clients of a daemon on every device kind, each
// subscribed to the watched resource: "socket" on the session socket,
// "connect" through `snodod connect` (its pipes handed over), "pty" on a
// pty handed over by `snodod connect --handover` (conn), whose session side
// is tty.
type goDevices struct {
	clients map[string]*goClient
	tty     *os.File
	conn    *connectProc
}

func goClientsOnEveryDevice(t *testing.T, d *daemonProc, socketVersion, connectVersion, ptyVersion string) goDevices {
	t.Helper()
	socket := connectGoOver(t, socketVersion, func(rec *recorder) mcp.Transport {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		return &recordingTransport{inner: &mcp.IOTransport{Reader: c, Writer: writeOnly{c}}, rec: rec}
	})
	connect := connectGoVia(t, d, connectVersion, goClientOptions)
	master, tty := openPTY(t)
	conn := startConnectOn(t, d, tty)
	if !eventually.Within(answerWithin, func() bool { return isRaw(t, tty) }) {
		t.Fatal("the handed-over pty was not put into raw mode")
	}
	pty := connectGoOver(t, ptyVersion, func(rec *recorder) mcp.Transport {
		return &recordingTransport{inner: &mcp.IOTransport{Reader: master, Writer: writeOnly{master}}, rec: rec}
	})
	clients := map[string]*goClient{"socket": socket, "connect": connect, "pty": pty}
	for name, c := range clients {
		if err := c.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: watchedURI}); err != nil {
			t.Fatalf("%s: subscribe: %v", name, err)
		}
	}
	return goDevices{clients: clients, tty: tty, conn: conn}
}

// sessionRows are st's sessions: id, kind and version.
func sessionRows(st *control.Status) []string {
	var out []string
	for _, s := range st.Sessions {
		out = append(out, fmt.Sprintf("%d %s %s", s.ID, s.Kind, s.Version))
	}
	return out
}

// survived checks what every session keeps across what (the crash, the
// upgrade): the daemon lists the same sessions, with the same ids, kinds
// and versions, as before; the pty on tty is still raw; and every client
// of traffic is answered and gets its events.
func survived(t *testing.T, what string, before, after *control.Status, tty *os.File, traffic map[string]*goTraffic) {
	t.Helper()
	if !slices.Equal(sessionRows(after), sessionRows(before)) {
		t.Errorf("sessions after %s %q, want the same as before %q", what, sessionRows(after), sessionRows(before))
	}
	if !isRaw(t, tty) {
		t.Errorf("the pty is not raw any more after %s", what)
	}
	for _, tr := range traffic {
		tr.eventsAfter(t, what)
	}
}

// eventsAfter checks, after what, that calls are answered and that the
// client's subscriptions deliver: it has the daemon report a resource
// update and a tool list change, and waits for both.
func (tr *goTraffic) eventsAfter(t *testing.T, what string) {
	t.Helper()
	tr.waitEchoes(t, tr.echoCount()+20)
	c := tr.c
	var updates, changes int
	c.locked(func() { updates, changes = len(c.updates), c.toolsChanged })
	c.call(t, t.Context(), "test_trigger_resource_update", nil)
	c.call(t, t.Context(), "test_trigger_tool_change", nil)
	if !eventually.Within(answerWithin, func() (ok bool) {
		c.locked(func() { ok = len(c.updates) > updates && c.toolsChanged > changes })
		return
	}) {
		t.Errorf("%s: no resource update or tool list change after %s", tr.name, what)
	}
}

// sameSession checks that the client went on in one session: it did not
// initialize again, and no id was answered twice.
func (tr *goTraffic) sameSession(t *testing.T) {
	t.Helper()
	if n := sentCount(tr.c.rec, "initialize") + sentCount(tr.c.rec, "server/discover"); n > 1 {
		t.Errorf("%s: %d initialize or discover requests sent, want at most 1 (no re-initialize)", tr.name, n)
	}
	if ids := answeredIDs(tr.c.rec); len(ids) > 0 {
		t.Errorf("%s: ids answered more than once: %v", tr.name, ids)
	}
}

// ptySession returns the id of the pty session in st.
func ptySession(st *control.Status) uint64 {
	for _, s := range st.Sessions {
		if s.Kind == "pty" {
			return s.ID
		}
	}
	return 0
}

// writeOnly is a writer whose Close does nothing: the reader's Close closes
// the shared connection.
type writeOnly struct{ io.Writer }

func (writeOnly) Close() error { return nil }

// goTraffic keeps a Go SDK client busy: four workers calling echo, one
// request at a time each, checking every answer, and a long sleep with
// progress.
type goTraffic struct {
	c       *goClient
	name    string
	sleepMs int           // the long sleep
	timeout time.Duration // of each echo
	done    chan struct{}
	wg      sync.WaitGroup
	sleep   chan error

	mu       sync.Mutex
	echoes   int
	errs     []string // other than lost or timed out
	lost     int      // answered "snodod restarted; this request was lost"
	timedOut int
}

const lostMessage = "snodod restarted; this request was lost"

func startGoTraffic(t *testing.T, c *goClient, name string) *goTraffic {
	return startGoTrafficWith(t, c, name, 2000, answerWithin)
}

func startGoTrafficWith(t *testing.T, c *goClient, name string, sleepMs int, timeout time.Duration) *goTraffic {
	tr := &goTraffic{c: c, name: name, sleepMs: sleepMs, timeout: timeout, done: make(chan struct{}), sleep: make(chan error, 1)}
	go func() {
		p := &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": sleepMs}}
		p.SetProgressToken("long " + name)
		res, err := c.cs.CallTool(context.Background(), p)
		if err == nil && (len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "done") {
			err = fmt.Errorf("sleep returned %+v", res.Content)
		}
		tr.sleep <- err
	}()
	for w := range 4 {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-tr.done:
					return
				default:
				}
				want := fmt.Sprintf("%s %d %d", name, w, i)
				ctx, cancel := context.WithTimeout(context.Background(), tr.timeout)
				res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
				cancel()
				tr.mu.Lock()
				switch {
				case err != nil && strings.Contains(err.Error(), lostMessage):
					tr.lost++
				case err != nil && ctx.Err() != nil:
					tr.timedOut++
				case err != nil:
					tr.errs = append(tr.errs, fmt.Sprintf("echo %q: %v", want, err))
				case len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != want:
					tr.errs = append(tr.errs, fmt.Sprintf("echo %q = %+v", want, res.Content))
				default:
					tr.echoes++
				}
				tr.mu.Unlock()
				time.Sleep(20 * time.Millisecond) // traffic, not a load test
			}
		}()
	}
	return tr
}

// end stops the workers and checks that no call failed otherwise than as
// lost or timed out.
func (tr *goTraffic) end(t *testing.T) {
	t.Helper()
	close(tr.done)
	tr.wg.Wait()
	if len(tr.errs) > 0 {
		t.Errorf("%s: %d failed calls: %q", tr.name, len(tr.errs), tr.errs)
	}
}

func (tr *goTraffic) echoCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.echoes
}

func (tr *goTraffic) waitEchoes(t *testing.T, n int) {
	t.Helper()
	if !eventually.Within(answerWithin, func() bool { return tr.echoCount() >= n }) {
		t.Fatalf("%s: %d echoes answered, want %d (errors %q)", tr.name, tr.echoCount(), n, tr.errs)
	}
}

// stop ends the traffic and checks it: no error, nothing lost or timed
// out, the sleep done, its progress received.
func (tr *goTraffic) stop(t *testing.T) {
	t.Helper()
	tr.end(t)
	if tr.lost > 0 || tr.timedOut > 0 {
		t.Errorf("%s: %d calls lost, %d timed out", tr.name, tr.lost, tr.timedOut)
	}
	select {
	case err := <-tr.sleep:
		if err != nil {
			t.Errorf("%s: the long sleep: %v", tr.name, err)
		}
	case <-time.After(answerWithin):
		t.Errorf("%s: the long sleep did not end", tr.name)
	}
	var progress int
	tr.c.locked(func() { progress = len(tr.c.progress["long "+tr.name]) })
	if progress < 2 {
		t.Errorf("%s: %d progress notifications for the long sleep, want several", tr.name, progress)
	}
}

// sentCount counts the requests sent with method.
func sentCount(r *recorder, method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.out {
		if e.Method == method && e.ID != nil {
			n++
		}
	}
	return n
}

// answeredIDs returns the ids that got more than one response.
func answeredIDs(r *recorder) []string {
	seen := map[string]int{}
	for _, e := range r.incoming() {
		if e.Method == "" && e.ID != nil {
			seen[string(e.ID)]++
		}
	}
	var twice []string
	for id, n := range seen {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	return twice
}

// tsUpgradeClient is e2e/node/upgrade.mjs running against the daemon.
type tsUpgradeClient struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuffer
}

type tsUpgradeSummary struct {
	Version      string
	Echoes       int
	Errors       []string
	Initializes  int
	Progress     int
	Sleep        string
	Updated      bool
	ToolsChanged bool
	ExitCode     *int
	Stderr       string
}

func startTSUpgradeClient(t *testing.T, d *daemonProc, version string, mode ...string) *tsUpgradeClient {
	t.Helper()
	node, dir := nodeClient(t)
	c := &tsUpgradeClient{cmd: exec.Command(node, append([]string{"upgrade.mjs", binary, version}, mode...)...), stderr: &syncBuffer{}}
	c.cmd.Dir, c.cmd.Env, c.cmd.Stderr = dir, d.env, c.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(stdout)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// readLine reads the client's next line of standard output.
func (c *tsUpgradeClient) readLine(t *testing.T) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		l, _ := c.out.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l == "" {
			t.Fatalf("the TypeScript client ended: %s", c.stderr.String())
		}
		return strings.TrimSpace(l)
	case <-time.After(60 * time.Second):
		t.Fatalf("the TypeScript client said nothing: %s", c.stderr.String())
		return ""
	}
}

func (c *tsUpgradeClient) waitReady(t *testing.T) {
	t.Helper()
	if l := c.readLine(t); l != "ready" {
		t.Fatalf("the TypeScript client said %q, want ready", l)
	}
}

func (c *tsUpgradeClient) upgraded(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.in, "upgraded\n"); err != nil {
		t.Fatal(err)
	}
}

func (c *tsUpgradeClient) finish(t *testing.T) tsUpgradeSummary {
	t.Helper()
	var s tsUpgradeSummary
	l := c.readLine(t)
	if err := json.Unmarshal([]byte(l), &s); err != nil {
		t.Fatalf("the TypeScript client's summary %q: %v", l, err)
	}
	c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("the TypeScript client: %v\n%s", err, c.stderr.String())
	}
	if strings.Contains(s.Stderr, "DATA RACE") {
		t.Errorf("the race detector reported a race in snodod connect:\n%s", s.Stderr)
	}
	return s
}
