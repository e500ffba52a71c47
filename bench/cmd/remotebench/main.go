// Command remotebench compares the two ways stdio clients reach one remote
// (Streamable HTTP) server (docs/upstreams.md §9): snodod, one daemon
// holding the connection, each client running `snodod connect NAME`; and
// mcp-remote from npm, the bridge clients use today, one `npx mcp-remote
// URL` per client. The server is the Go SDK's streamable peer
// (bench/peers/gosdkhttp) on loopback. For N clients (10) it measures:
//
//   - the memory of everything started for them: the PSS
//     (/proc/PID/smaps_rollup) of the processes' trees, snodod's daemon
//     included (it was running, the server not yet connected: a daemon
//     starts with the session, the remote connection at the first call);
//   - the time from starting the N clients at once to the N-th client's
//     first answer (initialize, then a tools/call echo);
//   - calls/s of the N clients each calling echo in a loop, and the CPU per
//     call of everything started for them;
//   - the p50 of one sequential client's echo: the official Go SDK client
//     through each bridge, and directly over HTTP; the added p50 of the
//     remote hop is the bridge's minus the direct one.
//
// It prints the table and, with -docs, writes it as the last section of
// docs/bench.md (between its markers, replacing the section of an earlier
// run: make bench runs it after mcpbench, which rewrites the page).
//
//	remotebench -snodod ../bin/snodod -server bin/gosdkhttp -node node [-clients 10] [-docs ../docs]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"
)

// run is one bridge's figures.
type run struct {
	Bridge      string
	PSS         int64         // bytes, everything started for the clients
	LastFirst   time.Duration // to the N-th client's first answer
	CallsPerSec float64
	CPUPerCall  time.Duration
	P50         time.Duration // the Go SDK client's sequential echo
	Problems    []string
}

func main() {
	var (
		snodod  = flag.String("snodod", "../bin/snodod", "the snodod binary")
		server  = flag.String("server", "bin/gosdkhttp", "the Go SDK's streamable HTTP peer")
		nodeDir = flag.String("node", "node", "the directory holding mcp-remote in node_modules (npm ci --prefix bench/node)")
		clients = flag.Int("clients", 10, "clients of the one server")
		loopFor = flag.Duration("for", 3*time.Second, "how long the clients call in the throughput phase")
		seq     = flag.Int("seq", 2000, "sequential calls of the latency phase")
		repeats = flag.Int("repeats", 3, "runs; the table shows medians")
		docs    = flag.String("docs", "", "where to write bench-remote.md (empty: nowhere)")
	)
	flag.Parse()
	if os.Getenv("BENCH_QUICK") == "1" {
		*repeats, *loopFor, *seq = 1, time.Second, 300
	}
	bin, err := filepath.Abs(*snodod)
	if err != nil {
		log.Fatal(err)
	}
	nodeAbs, _ := filepath.Abs(*nodeDir)
	_, noRemote := os.Stat(filepath.Join(nodeAbs, "node_modules", "mcp-remote", "package.json"))
	start, loadStart := time.Now(), loadAvg()
	var snodods, remotes []run
	var directs []time.Duration
	for r := range *repeats {
		srv, url, err := startServer(*server)
		if err != nil {
			log.Fatal(err)
		}
		direct, err := directP50(url, *seq)
		if err != nil {
			log.Fatal(err)
		}
		directs = append(directs, direct)
		s := runSnodod(bin, url, *clients, *loopFor, *seq)
		snodods = append(snodods, s)
		log.Printf("[%d/%d] snodod: %s", r+1, *repeats, describe(s))
		if noRemote == nil {
			m := runMCPRemote(nodeAbs, url, *clients, *loopFor, *seq)
			remotes = append(remotes, m)
			log.Printf("[%d/%d] mcp-remote: %s", r+1, *repeats, describe(m))
		}
		log.Printf("[%d/%d] direct Go SDK client p50 %s", r+1, *repeats, us(direct))
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}
	page := render(*clients, *loopFor, median(snodods), median(remotes), medianDuration(directs), len(remotes) > 0, *repeats,
		time.Since(start), loadStart, loadAvg())
	fmt.Print(page)
	if *docs != "" {
		if err := writeSection(filepath.Join(*docs, "bench.md"), page); err != nil {
			log.Fatal(err)
		}
	}
}

// The markers of remotebench's section of docs/bench.md.
const (
	sectionStart = "<!-- remotebench: written by bench/cmd/remotebench -->"
	sectionEnd   = "<!-- /remotebench -->"
)

// writeSection puts page at the end of the page at path, between the
// markers, in place of an earlier run's section.
func writeSection(path, page string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	text := string(b)
	if i := strings.Index(text, sectionStart); i >= 0 {
		rest := text[i:]
		if j := strings.Index(rest, sectionEnd); j >= 0 {
			text = text[:i] + rest[j+len(sectionEnd):]
		} else {
			text = text[:i]
		}
	}
	text = strings.TrimRight(text, "\n") + "\n\n" + sectionStart + "\n" + page + sectionEnd + "\n"
	return os.WriteFile(path, []byte(text), 0o644)
}

// startServer runs the peer on a free loopback port and returns its URL.
func startServer(bin string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		return nil, "", fmt.Errorf("the server printed %q: %v", line, err)
	}
	return cmd, "http://" + addr + "/mcp", nil
}

// directP50 is the p50 of the Go SDK client's sequential echo over HTTP.
func directP50(url string, n int) (time.Duration, error) {
	return sdkP50(&mcp.StreamableClientTransport{Endpoint: url}, n)
}

// sdkP50 connects the Go SDK client over t and returns the p50 of n
// sequential echo calls (after 50 of warm-up).
func sdkP50(t mcp.Transport, n int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "remotebench", Version: "1"}, nil).Connect(ctx, t, nil)
	if err != nil {
		return 0, err
	}
	defer cs.Close()
	lat := make([]time.Duration, 0, n)
	for i := range n + 50 {
		t0 := time.Now()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
			return 0, err
		}
		if i >= 50 {
			lat = append(lat, time.Since(t0))
		}
	}
	p50, _ := stats.Percentile(lat, 50)
	return p50, nil
}

// runSnodod measures snodod: a daemon hosting url as "remote", the
// clients through snodod connect remote.
func runSnodod(bin, url string, n int, loopFor time.Duration, seq int) run {
	res := run{Bridge: "snodod"}
	dir, err := os.MkdirTemp("", "remotebench-")
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	defer os.RemoveAll(dir)
	conf := fmt.Sprintf("[mcpServers.remote]\nurl = %q\nping_interval = \"0s\"\n", url)
	if err = os.MkdirAll(filepath.Join(dir, "snodod"), 0o700); err == nil {
		err = os.WriteFile(filepath.Join(dir, "snodod", "config.toml"), []byte(conf), 0o600)
	}
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	d, err := load.StartDaemon(bin, n+16, []string{"XDG_CONFIG_HOME=" + dir, "XDG_STATE_HOME=" + dir})
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	defer d.Stop()
	command := []string{bin, "connect", "--control-socket", d.Control(), "remote"}
	measure(&res, n, loopFor, func() *exec.Cmd { return exec.Command(command[0], command[1:]...) }, []int{d.PID()})
	p50, err := sdkP50(&mcp.CommandTransport{Command: exec.Command(command[0], command[1:]...)}, seq)
	if err != nil {
		res.Problems = append(res.Problems, "latency: "+err.Error())
	}
	res.P50 = p50
	return res
}

// runMCPRemote measures mcp-remote: npx mcp-remote URL per client, run
// where the package is installed (npx finds it there, offline), its
// configuration directory a temporary one.
func runMCPRemote(nodeDir, url string, n int, loopFor time.Duration, seq int) run {
	res := run{Bridge: "mcp-remote"}
	dir, err := os.MkdirTemp("", "remotebench-mr-")
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	defer os.RemoveAll(dir)
	mk := func() *exec.Cmd {
		cmd := exec.Command("npx", "--no-install", "mcp-remote", url, "--allow-http", "--transport", "http-only")
		cmd.Dir = nodeDir
		cmd.Env = append(os.Environ(), "MCP_REMOTE_CONFIG_DIR="+dir)
		return cmd
	}
	measure(&res, n, loopFor, mk, nil)
	p50, err := sdkP50(&mcp.CommandTransport{Command: mk()}, seq)
	if err != nil {
		res.Problems = append(res.Problems, "latency: "+err.Error())
	}
	res.P50 = p50
	return res
}

// measure starts n clients of mk's command at once and fills res: the
// time to the last first answer, the PSS of their trees and of also
// (the daemon), then calls/s and CPU per call while each calls in a loop
// for loopFor.
func measure(res *run, n int, loopFor time.Duration, mk func() *exec.Cmd, also []int) {
	cs := make([]*rawClient, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	firsts := make([]time.Duration, n)
	for i := range n {
		wg.Go(func() {
			c, err := startRaw(mk())
			if err == nil {
				err = c.handshake()
			}
			if err == nil {
				err = c.echo()
			}
			cs[i], errs[i], firsts[i] = c, err, time.Since(t0)
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		res.Problems = append(res.Problems, err.Error())
		return
	}
	res.LastFirst = slices.Max(firsts)
	pids := append([]int(nil), also...)
	for _, c := range cs {
		pids = append(pids, c.cmd.Process.Pid)
	}
	for _, p := range pids {
		res.PSS += load.TreePSS(p)
	}
	cpu := func() (sum time.Duration) {
		for _, p := range pids {
			sum += load.TreeUsage(p).Run
		}
		return sum
	}
	before := cpu()
	var calls sync.WaitGroup
	counts := make([]int, n)
	end := time.Now().Add(loopFor)
	t1 := time.Now()
	for i, c := range cs {
		calls.Go(func() {
			for time.Now().Before(end) {
				if err := c.echo(); err != nil {
					errs[i] = err
					return
				}
				counts[i]++
			}
		})
	}
	calls.Wait()
	took := time.Since(t1)
	used := cpu() - before
	total := 0
	for _, k := range counts {
		total += k
	}
	if err := errors.Join(errs...); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	if total > 0 {
		res.CallsPerSec = float64(total) / took.Seconds()
		res.CPUPerCall = used / time.Duration(total)
	}
}

// rawClient is a stdio MCP client of the fewest means: NDJSON lines out,
// answers matched by id, everything else skipped, so that what is
// measured is the bridge.
type rawClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startRaw(cmd *exec.Cmd) (*rawClient, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &rawClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

func (c *rawClient) request(method, params string) error {
	c.id++
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", c.id, method, params); err != nil {
		return err
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		var m struct {
			ID    *int            `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil || *m.ID != c.id {
			continue
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error)
		}
		return nil
	}
}

func (c *rawClient) handshake() error {
	if err := c.request("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"remotebench","version":"1"}}`); err != nil {
		return err
	}
	_, err := io.WriteString(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return err
}

func (c *rawClient) echo() error {
	return c.request("tools/call", `{"name":"echo","arguments":{"text":"x"}}`)
}

func (c *rawClient) close() {
	_ = c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

func describe(r run) string {
	s := fmt.Sprintf("PSS %.1f MiB, 10th first answer %d ms, %.0f calls/s, CPU %s per call, p50 %s",
		float64(r.PSS)/(1<<20), r.LastFirst.Milliseconds(), r.CallsPerSec, us(r.CPUPerCall), us(r.P50))
	if len(r.Problems) > 0 {
		s += "; problems: " + strings.Join(r.Problems, "; ")
	}
	return s
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// median is the run of the median of each figure, field by field.
func median(rs []run) run {
	if len(rs) == 0 {
		return run{}
	}
	m := run{Bridge: rs[0].Bridge}
	pick := func(f func(run) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return stats.Median(v)
	}
	m.PSS = int64(pick(func(r run) float64 { return float64(r.PSS) }))
	m.LastFirst = time.Duration(pick(func(r run) float64 { return float64(r.LastFirst) }))
	m.CallsPerSec = pick(func(r run) float64 { return r.CallsPerSec })
	m.CPUPerCall = time.Duration(pick(func(r run) float64 { return float64(r.CPUPerCall) }))
	m.P50 = time.Duration(pick(func(r run) float64 { return float64(r.P50) }))
	for _, r := range rs {
		m.Problems = append(m.Problems, r.Problems...)
	}
	return m
}

func medianDuration(ds []time.Duration) time.Duration {
	v := make([]float64, len(ds))
	for i, d := range ds {
		v[i] = float64(d)
	}
	return time.Duration(stats.Median(v))
}

// render is the page.
func render(n int, loopFor time.Duration, s, m run, direct time.Duration, haveRemote bool, repeats int, took time.Duration, load0, load1 string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Remote servers: snodod against mcp-remote\n\n")
	fmt.Fprintf(&b, "Written by `bench/cmd/remotebench` (`make bench`): %d stdio clients of one local\n", n)
	b.WriteString("Streamable HTTP server (the official Go SDK's, `bench/peers/gosdkhttp`, stateless,\n")
	b.WriteString("on loopback), through snodod (one daemon holding the connection, each client\n")
	b.WriteString("running `snodod connect remote`) and through mcp-remote from npm (each client\n")
	b.WriteString("running `npx mcp-remote URL --allow-http --transport http-only`). Medians of\n")
	fmt.Fprintf(&b, "%d run(s); %s, %d CPUs, load %s at the start, %s at the end; %s in all.\n\n", repeats, runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), load0, load1, took.Round(time.Second))
	b.WriteString("| | snodod | mcp-remote | ratio |\n|---|---:|---:|---:|\n")
	ratio := func(a, c float64) string {
		if !haveRemote || a == 0 || c == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f×", c/a)
	}
	mr := func(f string) string {
		if !haveRemote {
			return "not run"
		}
		return f
	}
	fmt.Fprintf(&b, "| memory of everything started for the clients (PSS) | %.1f MiB | %s | %s less |\n",
		float64(s.PSS)/(1<<20), mr(fmt.Sprintf("%.1f MiB", float64(m.PSS)/(1<<20))), ratio(float64(s.PSS), float64(m.PSS)))
	fmt.Fprintf(&b, "| time to the %dth client's first answer | %d ms | %s | %s faster |\n",
		n, s.LastFirst.Milliseconds(), mr(fmt.Sprintf("%d ms", m.LastFirst.Milliseconds())), ratio(float64(s.LastFirst), float64(m.LastFirst)))
	fmt.Fprintf(&b, "| calls/s, %d clients calling for %s | %.0f | %s | %s |\n",
		n, loopFor, s.CallsPerSec, mr(fmt.Sprintf("%.0f", m.CallsPerSec)), ratio(m.CallsPerSec, s.CallsPerSec))
	fmt.Fprintf(&b, "| CPU per call, everything started for the clients | %s | %s | %s less |\n",
		us(s.CPUPerCall), mr(us(m.CPUPerCall)), ratio(float64(s.CPUPerCall), float64(m.CPUPerCall)))
	fmt.Fprintf(&b, "| p50 of one Go SDK client's sequential echo | %s | %s | |\n", us(s.P50), mr(us(m.P50)))
	fmt.Fprintf(&b, "| added over the Go SDK client straight to the server (p50 %s) | %s | %s | |\n\n",
		us(direct), us(s.P50-direct), mr(us(m.P50-direct)))
	b.WriteString("Memory is the PSS (`/proc/PID/smaps_rollup`) of the process trees started for the\n")
	b.WriteString("clients, after each had its first answer: for snodod the daemon (already running,\n")
	b.WriteString("its remote connection not yet made when the clients start) and the connect\n")
	b.WriteString("processes; for mcp-remote each client's npx and node. The server is not counted.\n")
	b.WriteString("CPU per call is their run time (schedstat) over the loop, divided by its calls.\n")
	b.WriteString("The added p50 is the whole hop a stdio client pays over calling the server itself\n")
	b.WriteString("with the Go SDK's HTTP client: for snodod, the client's pipe to `snodod connect`,\n")
	b.WriteString("its socket to the daemon and the daemon's HTTP request (the goal, 100 µs, is for\n")
	b.WriteString("the remote hop on loopback); mcpclient's `BenchmarkHTTPCall` beside\n")
	b.WriteString("`BenchmarkGoSDKCall` (`go test -bench 'HTTPCall|GoSDKCall' ./mcpclient`) isolate the\n")
	b.WriteString("daemon's HTTP client alone.\n")
	if probs := append(s.Problems, m.Problems...); len(probs) > 0 {
		b.WriteString("\nProblems:\n\n")
		for _, p := range probs {
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
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
