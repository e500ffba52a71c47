// Command httpbench measures tools/call echo over Streamable HTTP: 64
// concurrent clients on keep-alive connections, each sending one call after
// another for a fixed time, against `snodod serve --demo --http`, the
// official Go SDK's streamable handler (stateless) and the TypeScript
// SDK's (stateless). It prints, and with -docs writes to
// docs/bench-http.md, calls/s and the server's CPU per call (from
// /proc/PID/stat), with the ratios to the best peer.
//
//	httpbench -snodod ../bin/snodod -gosdk bin/gosdkhttp [-node node] [-docs ../docs]
//
// snodod and the Go SDK get 2026-07-28 requests (per-request _meta, the
// headers of SEP-2243); the TypeScript SDK pinned in bench/node speaks
// 2025-11-25 at newest, so it gets session-less 2025-11-25 requests, which
// its stateless mode serves.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
)

const (
	modernCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	legacyCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
)

// server is one server under test.
type server struct {
	name    string
	cmd     *exec.Cmd
	body    string
	headers map[string]string
	url     string
}

type result struct {
	name       string
	calls      int64
	errors     int64
	elapsed    time.Duration
	cpu        time.Duration
	callsPerS  float64
	cpuPerCall time.Duration
}

func main() {
	var (
		snodod  = flag.String("snodod", "../bin/snodod", "the snodod binary")
		gosdk   = flag.String("gosdk", "bin/gosdkhttp", "the Go SDK peer (go build -o bin/ ./peers/gosdkhttp)")
		node    = flag.String("node", "node", "node, for the TypeScript SDK peer (bench/node, npm ci first); empty: left out")
		clients = flag.Int("clients", 64, "concurrent clients")
		dur     = flag.Duration("duration", 5*time.Second, "how long each server is loaded")
		docs    = flag.String("docs", "", "where to write bench-http.md (empty: nowhere)")
	)
	flag.Parse()
	dir, err := os.MkdirTemp("", "httpbench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	modern := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
	sn := exec.Command(*snodod, "serve", "--demo", "--http", "127.0.0.1:0", "--log-level", "warn",
		"--socket", filepath.Join(dir, "s.sock"))
	sn.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	servers := []*server{
		{name: "snodod", cmd: sn, body: modernCall, headers: modern},
		{name: "go-sdk (stateless)", cmd: exec.Command(*gosdk), body: modernCall, headers: modern},
	}
	if *node != "" {
		servers = append(servers, &server{name: "typescript-sdk (stateless)", cmd: exec.Command(*node, "node/http-server.mjs", "0"),
			body: legacyCall, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}})
	}
	var results []result
	for _, s := range servers {
		r, err := run(s, *clients, *dur)
		if err != nil {
			log.Printf("%s: %v (left out)", s.name, err)
			continue
		}
		results = append(results, r)
	}
	page := markdown(results, *clients, *dur)
	fmt.Print(page)
	if *docs != "" {
		if err := os.WriteFile(filepath.Join(*docs, "bench-http.md"), []byte(page), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// start runs s and finds its address: snodod's from `snodod status`, the
// peers' from their "listening" line.
func start(s *server) error {
	if s.name == "snodod" {
		var stderr bytes.Buffer
		s.cmd.Stderr = &stderr
		if err := s.cmd.Start(); err != nil {
			return err
		}
		sock := ""
		for i, a := range s.cmd.Args {
			if a == "--socket" {
				sock = s.cmd.Args[i+1]
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			out, err := exec.Command(s.cmd.Path, "status", "--json", "--socket", sock).Output()
			if err == nil {
				var st struct{ HTTP struct{ Listen, Path string } }
				if json.Unmarshal(out, &st) == nil && st.HTTP.Listen != "" {
					s.url = "http://" + st.HTTP.Listen + st.HTTP.Path
					return nil
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("snodod did not start: %s", stderr.String())
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no listening line: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		return fmt.Errorf("unexpected first line %q", line)
	}
	s.url = "http://" + addr + "/mcp" // the peers serve any path
	return nil
}

func run(s *server, clients int, dur time.Duration) (result, error) {
	if err := start(s); err != nil {
		return result{}, err
	}
	defer func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}()
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	call := func() error {
		req, err := http.NewRequest("POST", s.url, strings.NewReader(s.body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range s.headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"text":"hello"`)) {
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return nil
	}
	// Warm up: every connection once, and a check that calls work.
	for range clients {
		if err := call(); err != nil {
			return result{}, fmt.Errorf("warm-up call: %w", err)
		}
	}
	cpu0, err := load.ProcCPUTime(s.cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	var calls, errs atomic.Int64
	stop := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := call(); err != nil {
					errs.Add(1)
					continue
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := load.ProcCPUTime(s.cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	r := result{name: s.name, calls: calls.Load(), errors: errs.Load(), elapsed: elapsed, cpu: cpu1 - cpu0}
	r.callsPerS = float64(r.calls) / elapsed.Seconds()
	if r.calls > 0 {
		r.cpuPerCall = r.cpu / time.Duration(r.calls)
	}
	return r, nil
}

func markdown(rs []result, clients int, dur time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# HTTP benchmark\n\n`tools/call echo` over Streamable HTTP, %d concurrent clients on keep-alive connections, %s per server, one run, on the machine's 2 cores shared with the load generator (`bench/cmd/httpbench`). CPU is the server process's user and system time over the run, from /proc (10 ms ticks).\n\n", clients, dur)
	b.WriteString("| server | calls/s | server CPU per call | errors | calls/s vs best peer | CPU/call vs best peer |\n|---|---:|---:|---:|---:|---:|\n")
	var best *result
	for i := range rs {
		if rs[i].name != "snodod" && (best == nil || rs[i].callsPerS > best.callsPerS) {
			best = &rs[i]
		}
	}
	for _, r := range rs {
		ratio, cpuRatio := "", ""
		if best != nil && best.callsPerS > 0 && best.cpuPerCall > 0 {
			ratio = fmt.Sprintf("%.2f×", r.callsPerS/best.callsPerS)
			cpuRatio = fmt.Sprintf("%.2f×", float64(r.cpuPerCall)/float64(best.cpuPerCall))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.1f µs | %d | %s | %s |\n", r.name, r.callsPerS, float64(r.cpuPerCall.Nanoseconds())/1e3, r.errors, ratio, cpuRatio)
	}
	b.WriteString("\nGoal (issue 12): snodod ≥ 2× the best peer's calls/s, ≤ 0.5× its CPU per call. snodod and the Go SDK serve 2026-07-28 requests; the TypeScript SDK (1.32.2, bench/node) speaks 2025-11-25 at newest and serves session-less 2025-11-25 requests. Hosting a stdio server over HTTP (snodod versus supergateway and mcp-proxy) needs snodod's hosted upstreams and is not measured yet.\n")
	return b.String()
}
