//go:build soak

package e2e_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakHarness holds the soak's daemon, sessions and counts.
type soakHarness struct {
	dir, fake, memory string
	d                 *daemonProc
	sessions          []soakSession
	kinds             map[string]int

	lost, wrong, expected, cancelled, stray, updates atomic.Int64
	reloads, kills, touches, progress                atomic.Int64
	floods, floodSent, floodRefused                  atomic.Int64 // soak_flood_test.go
	outputFloods, outputFloodsCut, mostBuffered      atomic.Int64 // soak_flood_test.go
	minUpdates                                       int64        // the fewest updates one session got

	mu       sync.Mutex
	killedAt map[string][]time.Time
	groups   map[int]bool // process groups of hosted servers seen
	problems []string
	minutes  map[int][]time.Duration // latency of each success, by minute
	began    time.Time
	samples  []soakSample
	// floodPeak is the most goroutines the daemon had during a flood.
	floodPeak int
}

// soakFiles are the resource files read (their content is their name).
var soakFiles = []string{"a.txt", "b.md", "c.json"}

func newSoakHarness(t *testing.T) *soakHarness {
	dir, err := os.MkdirTemp("", "soak")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &soakHarness{dir: dir, fake: fakeUpstream(t), memory: npmServer(t, "server-memory"), kinds: map[string]int{},
		killedAt: map[string][]time.Time{}, groups: map[int]bool{}, minutes: map[int][]time.Duration{}}
	for _, name := range append(slices.Clone(soakFiles), "ticker.txt") {
		if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "files", name), []byte("soak "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// config is the daemon's configuration; alt changes the exec tool's
// description, so that a reload rebuilds the configured tools and tells
// every session their list changed. (A reload that changes server.* would
// rebuild the server, and the sessions running on the old one would stop
// hearing of file changes: catalog.Host.Apply closes the old server's
// folder watches.)
func (h *soakHarness) config(alt bool) string {
	return fmt.Sprintf(`
[daemon]
max_sessions = 2000
max_sessions_per_uid = 2000

[http]
listen = "127.0.0.1:0"
max_sessions = 2000
max_sessions_per_peer = 2000

[upstreams]
max_queued = 1024

[tools.soak_exec]
description = "soak %[1]v"
command = ["/bin/sh", "-c", "printf '%%s' \"$1\"", "soak-exec", "{{text}}"]
input.text = { required = true }
max_concurrency = 8

[resources.files]
path = %[2]q

[mcpServers.fake]
command = %[3]q
start = "eager"
restart = { max_attempts = 1000, initial_delay = "500ms", max_delay = "2s" }

[mcpServers.flood]
command = %[3]q
start = "eager"
restart = { max_attempts = 1000, initial_delay = "500ms", max_delay = "2s" }

[mcpServers.memory]
command = "node"
args = [%[4]q]
env = { MEMORY_FILE_PATH = %[5]q }
start = "eager"
restart = { max_attempts = 1000, initial_delay = "500ms", max_delay = "2s" }
`, alt, filepath.Join(h.dir, "files"), h.fake, h.memory, filepath.Join(h.dir, "memory.jsonl"))
}

// open opens total sessions: 70% on the socket, 15% handed over, 5% ptys,
// 10% over HTTP, each subscribed to the ticker file.
func (h *soakHarness) open(t *testing.T, total int) {
	st := h.d.statusJSON(t)
	url := "http://" + st.HTTP.Listen + st.HTTP.Path
	ticker := "file://" + filepath.Join(h.dir, "files", "ticker.txt")
	for i := range total {
		var s soakSession
		var err error
		kind := "socket"
		switch {
		case i%20 == 0:
			kind = "pty"
			s, err = handOverPTY(h.d.control)
		case i%20 < 4:
			kind = "hand-over"
			s, err = handOver(h.d.control)
		case i%20 < 6:
			kind = "http"
			s, err = dialSoakHTTP(url)
		default:
			s, err = dialSoakSocket(h.d.socket)
		}
		if err == nil {
			if ls, ok := s.(*lineSession); ok {
				err = ls.initialize()
			}
		}
		if err == nil {
			err = subscribe(s, ticker)
		}
		if err != nil {
			t.Fatalf("session %d (%s): %v", i, kind, err)
		}
		h.kinds[kind]++
		h.sessions = append(h.sessions, s)
	}
	h.began = time.Now()
}

// soakOp is one kind of call: its request line, how its answer is
// judged, and the hosted server it reaches, if any.
type soakOp struct {
	name     string
	weight   int
	cancel   bool
	upstream string
	line     func(h *soakHarness, id int64) string
	check    func(h *soakHarness, id int64, a soakAnswer) error
}

func soakText(id int64) string { return fmt.Sprintf("soak %d $(id) `id`; | &", id) }

func textIs(want string) func(*soakHarness, int64, soakAnswer) error {
	return func(_ *soakHarness, _ int64, a soakAnswer) error {
		got, err := toolText(a.r)
		if err != nil || got != want {
			return fmt.Errorf("text %q (%v), want %q", got, err, want)
		}
		return nil
	}
}

var soakOps = []soakOp{
	{name: "echo", weight: 25,
		line:  func(_ *soakHarness, id int64) string { return echoLine(int(id), soakText(id)) },
		check: func(h *soakHarness, id int64, a soakAnswer) error { return textIs(soakText(id))(h, id, a) }},
	// The demo's sleep reports progress about every 100 ms, as it can: on a
	// loaded machine a report may be skipped (catalog/demo.go), so none is
	// no fault; a report after the result would be (a stray answer).
	{name: "progress", weight: 10,
		line: func(_ *soakHarness, id int64) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":450},"_meta":{"progressToken":%d}}}`, id, id)
		},
		check: func(h *soakHarness, id int64, a soakAnswer) error {
			h.progress.Add(int64(a.progress))
			return textIs("done")(h, id, a)
		}},
	{name: "cancel", weight: 10, cancel: true,
		line: func(_ *soakHarness, id int64) string { return callLine(int(id), "sleep", `{"ms":5000}`) }},
	{name: "exec", weight: 10,
		line: func(_ *soakHarness, id int64) string {
			b, _ := json.Marshal(map[string]string{"text": soakText(id)})
			return callLine(int(id), "soak_exec", string(b))
		},
		check: func(h *soakHarness, id int64, a soakAnswer) error { return textIs(soakText(id))(h, id, a) }},
	{name: "resource", weight: 15,
		line: func(h *soakHarness, id int64) string {
			name := soakFiles[id%int64(len(soakFiles))]
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q}}`, id, "file://"+filepath.Join(h.dir, "files", name))
		},
		check: func(h *soakHarness, id int64, a soakAnswer) error {
			want := "soak " + soakFiles[id%int64(len(soakFiles))]
			if a.r.Error != nil || !strings.Contains(string(a.r.Result), fmt.Sprintf(`"text":%q`, want)) {
				return fmt.Errorf("contents %.200s, want %q", a.r.Result, want)
			}
			return nil
		}},
	{name: "fake", weight: 20, upstream: "fake",
		line: func(_ *soakHarness, id int64) string {
			return callLine(int(id), "fake__echo", fmt.Sprintf(`{"n":%d}`, id))
		},
		check: func(_ *soakHarness, id int64, a soakAnswer) error {
			if a.r.Error != nil || !strings.Contains(string(a.r.Result), fmt.Sprintf(`\"arguments\":{\"n\":%d}`, id)) {
				return fmt.Errorf("fake echo %.300s %+v", a.r.Result, a.r.Error)
			}
			return nil
		}},
	{name: "memory", weight: 5, upstream: "memory",
		line: func(_ *soakHarness, id int64) string { return callLine(int(id), "memory__read_graph", `{}`) },
		check: func(_ *soakHarness, _ int64, a soakAnswer) error {
			if a.r.Error != nil || !strings.Contains(string(a.r.Result), `entities`) || strings.Contains(string(a.r.Result), `"isError":true`) {
				return fmt.Errorf("read_graph %.300s %+v", a.r.Result, a.r.Error)
			}
			return nil
		}},
	{name: "list", weight: 5,
		line: func(_ *soakHarness, id int64) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)
		},
		check: func(_ *soakHarness, _ int64, a soakAnswer) error {
			if a.r.Error != nil || !strings.Contains(string(a.r.Result), `"name":"echo"`) {
				return fmt.Errorf("tools/list %.200s", a.r.Result)
			}
			return nil
		}},
}

func pick(r *rand.Rand) int {
	total := 0
	for _, op := range soakOps {
		total += op.weight
	}
	n := r.IntN(total)
	for i, op := range soakOps {
		if n -= op.weight; n < 0 {
			return i
		}
	}
	return 0
}

// record keeps a success's latency in its minute.
func (h *soakHarness) record(at time.Time, took time.Duration) {
	m := int(at.Sub(h.began) / time.Minute)
	h.mu.Lock()
	h.minutes[m] = append(h.minutes[m], took)
	h.mu.Unlock()
}

// soakSample is the daemon's load at one moment.
type soakSample struct {
	what                         string
	at                           time.Duration
	rssKB, fds, goroutines, kids int
	sessions                     int
	buffered                     int64
}

// sample reads the daemon's RSS, descriptors and children from /proc and
// its goroutines and sessions from its status.
func (h *soakHarness) sample(t *testing.T, what string) soakSample {
	pid := h.d.cmd.Process.Pid
	s := soakSample{what: what, at: time.Since(h.began)}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				fmt.Sscan(v, &s.rssKB)
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.fds = len(fds)
	}
	s.kids = len(children(t, pid))
	if st, err := h.d.status(t.Context()); err == nil {
		s.goroutines, s.sessions, s.buffered = st.Goroutines, len(st.Sessions), st.BufferedBytes
		if st.HTTP != nil {
			s.sessions += st.HTTP.Sessions
		}
	}
	h.mu.Lock()
	h.samples = append(h.samples, s)
	h.mu.Unlock()
	return s
}

// report is the soak's page (docs/bench-soak.md).
func (h *soakHarness) report(dur time.Duration, total int, start, end, idle soakSample, left []string) string {
	var b strings.Builder
	var served int
	for _, l := range h.minutes {
		served += len(l)
	}
	fmt.Fprintf(&b, "# Soak\n\nWritten by `make soak` (e2e/soak_test.go, build tag `soak`): rerun it rather than edit it.\n\n")
	fmt.Fprintf(&b, "Run of %s, %s UTC on %d cores (%s), load average %s at the end.\n\n", dur, time.Now().UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), runtime.Version(), loadAvg())
	fmt.Fprintf(&b, "%d sessions through `snodod serve`: %d on the session socket, %d handed over, %d ptys, %d over Streamable HTTP; ", total, h.kinds["socket"], h.kinds["hand-over"], h.kinds["pty"], h.kinds["http"])
	fmt.Fprintf(&b, "each calls, every 1.5 to 4.5 s, the demo's echo and sleep (with progress, and cancelled), an exec tool, a file resource, tools/list and two hosted servers (the fake, and server-memory from npm), and holds a subscription to a file rewritten every 5 s. ")
	fmt.Fprintf(&b, "The configuration was reloaded %d times (every 30 s) and a hosted server killed with SIGKILL %d times (every 60 s). ", h.reloads.Load(), h.kills.Load())
	fmt.Fprintf(&b, "Every 60 s a third hosted server flooded a session that never answers with requests for 5 s (%d floods: %d requests, %d refused at once by upstreams.max_server_requests; at most %d daemon goroutines meanwhile). ",
		h.floods.Load(), h.floodSent.Load(), h.floodRefused.Load(), h.floodPeak)
	fmt.Fprintf(&b, "Every 45 s one more client asked for %d answers of 4 MB and never read them: %d such floods, %d of them cut off at the write timeout; the daemon's buffers (unfinished lines and pending output) held %.1f MB at most, against daemon.max_buffered_bytes of 64 MB.\n\n", outputFloodCalls, h.outputFloods.Load(), h.outputFloodsCut.Load(), float64(h.mostBuffered.Load())/(1<<20))
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| calls answered and right | %d |\n| responses lost | %d |\n| wrong answers | %d |\n", served, h.lost.Load(), h.wrong.Load())
	fmt.Fprintf(&b, "| answers to cancelled or unknown requests, progress after a result | %d |\n| calls cancelled (never answered, as they must be) | %d |\n", h.stray.Load(), h.cancelled.Load())
	fmt.Fprintf(&b, "| progress notifications before their results | %d |\n", h.progress.Load())
	fmt.Fprintf(&b, "| calls failed by a hosted server being killed | %d |\n| resource updates received (the fewest by one session, of %d file changes) | %d (%d) |\n| processes left after the daemon exited | %d |\n\n", h.expected.Load(), h.touches.Load(), h.updates.Load(), h.minUpdates, len(left))
	fmt.Fprintf(&b, "| daemon | RSS | open fds | goroutines | children | sessions | buffered bytes |\n|---|---|---|---|---|---|---|\n")
	for _, s := range []soakSample{start, end, idle} {
		fmt.Fprintf(&b, "| %s | %.1f MB | %d | %d | %d | %d | %d |\n", s.what, float64(s.rssKB)/1024, s.fds, s.goroutines, s.kids, s.sessions, s.buffered)
	}
	fmt.Fprintf(&b, "\nEvery 30 s:\n\n| at | RSS | open fds | goroutines | children |\n|---|---|---|---|---|\n")
	for _, s := range h.samples {
		if s.what == "" {
			fmt.Fprintf(&b, "| %v | %.1f MB | %d | %d | %d |\n", s.at.Round(time.Second), float64(s.rssKB)/1024, s.fds, s.goroutines, s.kids)
		}
	}
	fmt.Fprintf(&b, "\nLatency of the calls that do not sleep, by minute:\n\n| minute | calls | p50 | p99 |\n|---|---|---|---|\n")
	mins := make([]int, 0, len(h.minutes))
	for m := range h.minutes {
		mins = append(mins, m)
	}
	slices.Sort(mins)
	for _, m := range mins {
		l := h.minutes[m]
		if time.Duration(m)*time.Minute >= dur {
			continue // the calls that ended after the deadline
		}
		slices.Sort(l)
		fmt.Fprintf(&b, "| %d | %d | %v | %v |\n", m+1, len(l), l[len(l)/2].Round(10*time.Microsecond), l[len(l)*99/100].Round(10*time.Microsecond))
	}
	if len(h.problems) > 0 || len(left) > 0 {
		fmt.Fprintf(&b, "\nProblems:\n\n")
		for _, p := range append(slices.Clone(h.problems), left...) {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	return b.String()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
