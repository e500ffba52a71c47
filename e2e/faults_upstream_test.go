package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// The hosted-server faults (docs/upstreams.md §7), through snodod serve: the
// fake upstream misbehaves in every way a server can while a session calls
// it, beside a second upstream and the daemon's own tools, which must be
// unharmed, and the daemon's children must be only the instances it runs. (A
// daemon killed with SIGKILL leaving a grandchild for the next one to kill
// is TestUpstreamOrphansAfterKill9.)

// upstreamFaultConfig hosts the fake as "fake" (its requests time out
// after 2 s), a second fake as "other", and a fake that exits at every
// start as "broken", retried quickly.
func upstreamFaultConfig(fake, pidfile string) string {
	return fmt.Sprintf(`
[mcpServers.fake]
command = %[1]q
args = ["-grandchild", %[2]q]
start = "eager"
request_timeout = "2s"
restart = { initial_delay = "100ms", max_delay = "200ms" }

[mcpServers.other]
command = %[1]q
start = "eager"

[mcpServers.broken]
command = %[1]q
args = ["-exit-at-start", "3", "-exit-stderr", "fatal: no such token"]
start = "eager"
restart = { max_attempts = 3, initial_delay = "50ms", max_delay = "100ms" }
`, fake, pidfile)
}

// upstreamState is the named upstream's row of d's status.
func upstreamState(st *control.Status, name string) (control.Upstream, bool) {
	for _, u := range st.Upstreams {
		if u.Name == name {
			return u, true
		}
	}
	return control.Upstream{}, false
}

// unharmed checks that the other upstream and the daemon's own tools
// still serve s, and that the daemon's children are only the instances
// its status lists.
func unharmed(t *testing.T, d *daemonProc, s *sessionConn, id int) {
	t.Helper()
	if err := s.send(callLine(id, "other__echo", `{"still":"served"}`)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.answer(strconv.Itoa(id), answerWithin); err != nil || r.Error != nil || !strings.Contains(string(r.Result), `still`) {
		t.Errorf("the other upstream: %+v %v", r, err)
	}
	if err := s.echo(id+1, "the daemon's own tool"); err != nil {
		t.Error(err)
	}
	// A killed instance stays a child until the daemon has reaped it, and
	// a restarting one is a child before status lists its pid: wait for
	// the two to agree.
	var pids, strays []int
	eventually.Within(answerWithin, func() bool {
		st, err := d.status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pids, strays = pids[:0], strays[:0]
		for _, u := range st.Upstreams {
			if u.PID != 0 {
				pids = append(pids, u.PID)
			}
		}
		for _, child := range children(t, d.cmd.Process.Pid) {
			if !slices.Contains(pids, child) {
				strays = append(strays, child)
			}
		}
		return len(strays) == 0
	})
	for _, child := range strays {
		t.Errorf("the daemon has a child %d that no upstream runs (status: %v)", child, pids)
	}
}

// call sends a tools/call and returns its answer.
func call(t *testing.T, s *sessionConn, id int, tool, args string) reply {
	t.Helper()
	if err := s.send(callLine(id, tool, args)); err != nil {
		t.Fatal(err)
	}
	r, err := s.answer(strconv.Itoa(id), answerWithin)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

// failed reports whether r is an error: a JSON-RPC error, or an isError
// result; what says why.
func failed(r reply) (bool, string) {
	if r.Error != nil {
		return true, r.Error.Message + " " + string(r.Error.Data)
	}
	return strings.Contains(string(r.Result), `"isError":true`), string(r.Result)
}

func TestUpstreamFaults(t *testing.T) {
	fake := fakeUpstream(t)
	dir := publicDir(t)
	pidfile := filepath.Join(dir, "grandchild.pid")
	d := startDaemon(t, upstreamFaultConfig(fake, pidfile), []string{"XDG_STATE_HOME=" + filepath.Join(dir, "state")})
	d.awaitStatus(t, "fake and other ready", answerWithin, func(st *control.Status) bool {
		f, _ := upstreamState(st, "fake")
		o, _ := upstreamState(st, "other")
		return f.State == "ready" && o.State == "ready"
	})
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	id := 100
	next := func() int { id += 10; return id }

	grandchild := func(t *testing.T) int {
		t.Helper()
		return awaitPIDFile(t, pidfile, "the fake did not start its grandchild")
	}

	t.Run("killed mid-call", func(t *testing.T) {
		st, _ := d.status(t.Context())
		before, _ := upstreamState(st, "fake")
		orphan := grandchild(t)
		if err := os.Remove(pidfile); err != nil {
			t.Fatal(err)
		}
		n := next()
		if err := s.send(callLine(n, "fake__slow", `{"ms":60000}`)); err != nil {
			t.Fatal(err)
		}
		d.awaitStatus(t, "the slow call in flight", answerWithin, func(st *control.Status) bool {
			u, _ := upstreamState(st, "fake")
			return u.InFlight == 1
		})
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r, err := s.answer(strconv.Itoa(n), answerWithin)
		if isErr, why := failed(r); err != nil || !isErr {
			t.Fatalf("the call in flight when its server was killed: %+v %v, want an error", r, err)
		} else {
			t.Logf("the killed call was answered: %s", why)
		}
		d.awaitStatus(t, "fake restarted", answerWithin, func(st *control.Status) bool {
			u, _ := upstreamState(st, "fake")
			return u.State == "ready" && u.PID != before.PID
		})
		if !waitGone(orphan, answerWithin) {
			t.Errorf("the killed instance's grandchild %d still runs", orphan)
		}
		if r := call(t, s, next(), "fake__echo", `{"after":"the kill"}`); r.Error != nil {
			t.Errorf("fake after its restart: %+v", r.Error)
		}
		unharmed(t, d, s, next())
	})

	t.Run("50 MB of stderr", func(t *testing.T) {
		if r := call(t, s, next(), "fake__stderr", `{"bytes":52428800}`); r.Error != nil {
			t.Errorf("the call that floods stderr: %+v", r.Error)
		}
		unharmed(t, d, s, next())
	})

	t.Run("garbage and a 10 MB line on stdout", func(t *testing.T) {
		if r := call(t, s, next(), "fake__junk", `{"text":"\u0000garbage {\"not\":\"json-rpc\"}"}`); r.Error != nil {
			t.Errorf("junk: %+v", r.Error)
		}
		r := call(t, s, next(), "fake__big", `{"bytes":10000000}`)
		if isErr, why := failed(r); !isErr || !strings.Contains(why, "line over the 2000000-byte limit") {
			t.Errorf("a 10 MB answer: %.300s, want an error naming the line limit", why)
		}
		if r := call(t, s, next(), "fake__echo", `{"after":"the long line"}`); r.Error != nil {
			t.Errorf("fake after the long line: %+v", r.Error)
		}
		unharmed(t, d, s, next())
	})

	t.Run("never answers", func(t *testing.T) {
		r := call(t, s, next(), "fake__never", `{}`)
		if isErr, why := failed(r); !isErr {
			t.Errorf("a call the server never answers: %s, want an error at its request_timeout", why)
		}
		n := next()
		if err := s.send(callLine(n, "fake__never", `{}`), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, n)); err != nil {
			t.Fatal(err)
		}
		if r := call(t, s, next(), "fake__echo", `{"after":"never"}`); r.Error != nil {
			t.Errorf("fake after a call it never answered: %+v", r.Error)
		}
		unharmed(t, d, s, next())
	})

	t.Run("a flood of requests for a client that never answers", func(t *testing.T) {
		// A flood (docs/upstreams.md §5): during one call, the fake writes
		// sampling, elicitation, roots and ping requests with fresh ids as
		// fast as it can to a 2025-06-18 client that declared those
		// capabilities and never answers. Before, a goroutine per request
		// waited for one of the session's 16 places: 332k goroutines and
		// 4 GB in 15 s.
		attacker := mustDial(t, d.socket)
		if err := attacker.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"attacker","version":"1"}}}`); err != nil {
			t.Fatal(err)
		}
		if _, err := attacker.answer("0", answerWithin); err != nil {
			t.Fatal(err)
		}
		if err := attacker.send(initializedLine); err != nil {
			t.Fatal(err)
		}
		st, _ := d.status(t.Context())
		goroutines, rssBefore := st.Goroutines, rssKB(d.cmd.Process.Pid)
		n := next()
		if err := attacker.send(callLine(n, "fake__flood", `{"ms":1500}`)); err != nil {
			t.Fatal(err)
		}
		flood, asked := floodAnswer(t, attacker, n)
		peak, served := 0, 0
		var r reply
		for done := false; !done; {
			select {
			case r = <-flood:
				done = true
			default:
				st, _ := d.status(t.Context())
				peak = max(peak, st.Goroutines)
				if err := s.echo(next(), "beside the flood"); err != nil { // the healthy session
					t.Fatalf("the healthy session during the flood: %v", err)
				}
				served++
			}
		}
		var counts struct{ Sent, Answered, Refused int }
		if isErr, why := failed(r); isErr {
			t.Fatalf("the flooding call: %s", why)
		}
		if err := json.Unmarshal(structuredOf(r), &counts); err != nil {
			t.Fatalf("the flood's counts %s: %v", r.Result, err)
		}
		st, err := d.status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		u, _ := upstreamState(st, "fake")
		t.Logf("the fake sent %d requests: %d answered, %d refused, status counts %d refused; the client was asked %d times; daemon goroutines %d before, %d at most; the healthy session had %d answers meanwhile",
			counts.Sent, counts.Answered, counts.Refused, u.Refused, *asked, goroutines, peak, served)
		if counts.Sent < 1000 || counts.Refused == 0 || u.Refused == 0 {
			t.Errorf("the flood: %+v, status %d refused; want more than 1000 requests and refusals counted", counts, u.Refused)
		}
		if *asked > 16 {
			t.Errorf("the client was sent %d requests, more than its 16 places", *asked)
		}
		if peak-goroutines > 100 {
			t.Errorf("the daemon's goroutines went from %d to %d during the flood", goroutines, peak)
		}
		if !eventually.Within(answerWithin, func() bool { st, _ := d.status(t.Context()); return st.Goroutines <= goroutines+10 }) {
			st, _ := d.status(t.Context())
			t.Errorf("the daemon's goroutines: %d before, %d after the flood", goroutines, st.Goroutines)
		}
		rssAfter := rssKB(d.cmd.Process.Pid)
		t.Logf("daemon RSS: %d KiB before the flood, %d KiB after", rssBefore, rssAfter)
		if rssAfter-rssBefore > 64<<10 {
			t.Errorf("the daemon's RSS grew by %d MiB with the flood", (rssAfter-rssBefore)>>10)
		}
		attacker.Close()
		unharmed(t, d, s, next())
	})

	t.Run("a grandchild that ignores SIGTERM", func(t *testing.T) {
		pid := grandchild(t)
		out, err := d.command("upstream", "stop", "fake").CombinedOutput()
		if err != nil {
			t.Fatalf("upstream stop fake: %v\n%s", err, out)
		}
		if !waitGone(pid, answerWithin) {
			t.Errorf("the grandchild %d outlives its upstream's stop", pid)
		}
		unharmed(t, d, s, next())
	})

	t.Run("exits at every start", func(t *testing.T) {
		st := d.awaitStatus(t, "broken failed after its attempts", answerWithin, func(st *control.Status) bool {
			u, _ := upstreamState(st, "broken")
			return u.State == "failed"
		})
		u, _ := upstreamState(st, "broken")
		if u.Failures < 3 || !strings.Contains(u.LastExit+u.Cause, "3") {
			t.Errorf("broken: %+v, want 3 failures and its exit status", u)
		}
		r := call(t, s, next(), "broken__echo", `{}`)
		if isErr, why := failed(r); !isErr || !strings.Contains(why, "no such token") {
			t.Errorf("a call to the failed upstream: %.400s, want an error with its stderr", why)
		}
		unharmed(t, d, s, next())
	})
	d.stop(t)
	if kids := children(t, d.cmd.Process.Pid); len(kids) != 0 {
		t.Errorf("children after the drain: %v", kids)
	}
}

// TestStateDirectoryUnwritable: with the state directory read-only, or on
// a full file system (each a tmpfs mounted in a mount namespace of the
// daemon's own), hosted servers are served, restarted and reloaded as
// ever; the catalog cache that cannot be written is said once in the log,
// not at every listing.
func TestStateDirectoryUnwritable(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "mounting a file system for the daemon needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		skipOrFail(t, "unshare (util-linux) is not installed")
	}
	fake := fakeUpstream(t)
	for _, tc := range []struct{ name, mount string }{
		{"read-only", `mount -t tmpfs -o ro tmpfs "$STATE"`},
		{"full", `mount -t tmpfs -o size=4k,nr_inodes=2 tmpfs "$STATE" && mkdir "$STATE/snodod" && { head -c 65536 /dev/zero >"$STATE/fill" 2>/dev/null; true; }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := filepath.Join(publicDir(t), "state")
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			wrapper := []string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", tc.mount + ` && exec "$@"`, "sh"}
			d := startWrapped(t, wrapper, fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nstart = \"eager\"\n", fake),
				[]string{"STATE=" + state, "XDG_STATE_HOME=" + state})
			s := mustDial(t, d.socket)
			if err := s.initialize("2025-11-25"); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if r := call(t, s, 10*i+1, "fake__echo", `{"round":1}`); r.Error != nil {
					t.Fatalf("round %d: %+v", i, r.Error)
				}
				st, _ := d.status(t.Context())
				before, _ := upstreamState(st, "fake")
				if out, err := d.command("upstream", "restart", "fake").CombinedOutput(); err != nil {
					t.Fatalf("upstream restart: %v\n%s", err, out)
				}
				d.awaitStatus(t, "fake ready again", answerWithin, func(st *control.Status) bool {
					u, _ := upstreamState(st, "fake")
					return u.State == "ready" && u.PID != 0 && u.PID != before.PID
				})
			}
			d.signal(t, syscall.SIGHUP)
			if r := call(t, s, 99, "fake__echo", `{"after":"the reload"}`); r.Error != nil {
				t.Fatalf("after the reload: %+v", r.Error)
			}
			if err := s.echo(100, "the daemon's own tool"); err != nil {
				t.Fatal(err)
			}
			log := d.stderr.String()
			if n := strings.Count(log, "upstream catalog cache: cannot"); n != 1 {
				t.Errorf("the log says %d times that the cache cannot be written, want once:\n%s", n, log)
			}
		})
	}
}

// floodAnswer reads c's lines in the background until the answer to id,
// counting the requests snodod sent it meanwhile (never answered).
func floodAnswer(t *testing.T, c *sessionConn, id int) (<-chan reply, *int) {
	ch, asked := make(chan reply, 1), new(int)
	go func() {
		deadline := time.Now().Add(answerWithin)
		for {
			r, line, err := c.next(time.Until(deadline))
			if err != nil {
				t.Errorf("waiting for the answer to %d: %v", id, err)
				ch <- reply{Error: &rpcError{Message: err.Error()}}
				return
			}
			switch {
			case r.Method != "" && r.ID != nil:
				*asked++ // read only once ch has its answer
			case r.Method != "":
			case string(r.ID) == strconv.Itoa(id):
				ch <- r
				return
			default:
				t.Errorf("waiting for the answer to %d, got %.200s", id, line)
			}
		}
	}()
	return ch, asked
}

// structuredOf is a tools/call result's structuredContent.
func structuredOf(r reply) json.RawMessage {
	var res struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	_ = json.Unmarshal(r.Result, &res)
	return res.StructuredContent
}

// rssKB is a process's resident set, in KiB, from /proc (0 when it
// cannot be read).
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int
			fmt.Sscan(v, &kb)
			return kb
		}
	}
	return 0
}
