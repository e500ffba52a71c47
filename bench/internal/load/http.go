package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP scenarios: tools/call echo over Streamable HTTP from concurrent
// clients on keep-alive connections, for a fixed time, against `snodod
// serve --demo --http` and the SDKs' streamable servers (stateless), and
// against the hosts of one stdio server (httphost.go), in legacy sessions.

// HTTPServer is one server of the HTTP scenarios.
type HTTPServer struct {
	Name    string
	Command []string
	Env     []string
	// Socket is snodod serve's session socket ("" for a peer): snodod's
	// address comes from `snodod status` there (with View appended to
	// its http.path: "/NAME" is the upstream NAME passed through); a
	// peer's is URL, once something accepts there, or else from its
	// "listening ADDR" line.
	Socket  string
	View    string
	URL     string
	Body    string            // the request
	Headers map[string]string // sent with it
	// Session, when set, is the legacy protocol version every client
	// opens a session at first (initialize, notifications/initialized);
	// its Mcp-Session-Id then goes with each of its calls.
	Session string
	// Unavailable says why the server cannot be run here ("" when it
	// can): it is reported as n/a with this reason.
	Unavailable string
}

// HTTPResult is what one server did.
type HTTPResult struct {
	Server      string
	Calls       int64
	Errors      int64
	CallsPerSec float64
	// CPUPerCall is µs of CPU (exact, schedstat) of the server's whole
	// process tree: a gateway and the stdio servers it spawned.
	CPUPerCall float64
	// ChildCPUPerCall is the part of it of the processes under the
	// server's own: the stdio servers a host spawned.
	ChildCPUPerCall float64
	// Processes is the size of that tree during the load.
	Processes   int
	Unavailable string // why the server was not run, as HTTPServer's
	Problems    []string
}

// The echo calls of the HTTP scenario: 2026-07-28 with its headers
// (SEP-2243), and a session-less 2025-11-25 call for servers that speak no
// 2026.
const (
	HTTPModernCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	HTTPLegacyCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
)

// HTTPModernHeaders are the headers of HTTPModernCall.
var HTTPModernHeaders = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}

// SnododHTTP is `snodod serve --demo` listening for HTTP on a free port,
// its sockets in dir.
func SnododHTTP(snodod, dir string) HTTPServer {
	s := snododServe(snodod, dir, "--demo")
	s.Body, s.Headers = HTTPModernCall, HTTPModernHeaders
	return s
}

// snododServe is `snodod serve` with args, listening for HTTP on a free
// port, its session socket in dir, its configuration under dir/config
// and its state under dir/state.
func snododServe(snodod, dir string, args ...string) HTTPServer {
	sock := filepath.Join(dir, "s.sock")
	return HTTPServer{Name: "snodod", Socket: sock,
		Command: append(append([]string{snodod, "serve"}, args...), "--http", "127.0.0.1:0", "--log-level", "warn", "--socket", sock),
		Env:     []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
}

// RunHTTP loads s with clients concurrent clients for d.
func RunHTTP(s HTTPServer, clients int, d time.Duration) HTTPResult {
	res := HTTPResult{Server: s.Name, CallsPerSec: nan(), CPUPerCall: nan(), ChildCPUPerCall: nan(), Unavailable: s.Unavailable}
	if s.Unavailable != "" {
		return res
	}
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Env = append(os.Environ(), s.Env...)
	url, err := startHTTP(s, cmd)
	defer func() {
		if cmd.Process != nil {
			endTree(cmd)
		}
	}()
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	hc := httpClient{client: client, url: url, headers: s.Headers}
	sessions := make([]string, clients)
	for i := range clients { // every connection once, and a check that calls work
		if s.Session != "" {
			id, err := hc.open(s.Session)
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("session %d: %v", i+1, err))
				return res
			}
			sessions[i] = id
		}
		if err := hc.call(s.Body, sessions[i]); err != nil {
			res.Problems = append(res.Problems, "warm-up call: "+err.Error())
			return res
		}
	}
	tree := processTree(cmd.Process.Pid)
	res.Processes = len(tree)
	before, beforeUnder, err := treeUsage(tree)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	var calls, errs atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := hc.call(s.Body, sessions[i]); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, afterUnder, err := treeUsage(tree)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	if now := processTree(cmd.Process.Pid); len(now) != len(tree) {
		res.Problems = append(res.Problems, fmt.Sprintf("%d processes before the load, %d after: the CPU of those that came or went is not all counted", len(tree), len(now)))
	}
	res.Calls, res.Errors = calls.Load(), errs.Load()
	res.CallsPerSec = float64(res.Calls) / elapsed.Seconds()
	if res.Calls > 0 {
		res.CPUPerCall = float64(after.Sub(before).Run) / float64(time.Microsecond) / float64(res.Calls)
		res.ChildCPUPerCall = float64(afterUnder.Sub(beforeUnder).Run) / float64(time.Microsecond) / float64(res.Calls)
	}
	if e, ok := firstErr.Load().(string); ok {
		res.Problems = append(res.Problems, fmt.Sprintf("%d failed calls, the first: %s", res.Errors, e))
	}
	return res
}

// startHTTP starts cmd and finds the server's URL.
func startHTTP(s HTTPServer, cmd *exec.Cmd) (string, error) {
	if s.Socket != "" {
		stderr := &tail{max: 4 << 10}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			return "", err
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			st := exec.Command(cmd.Path, "status", "--json", "--socket", s.Socket)
			st.Env = cmd.Env
			if out, err := st.Output(); err == nil {
				var v struct{ HTTP struct{ Listen, Path string } }
				if json.Unmarshal(out, &v) == nil && v.HTTP.Listen != "" {
					return "http://" + v.HTTP.Listen + v.HTTP.Path + s.View, nil
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "", fmt.Errorf("snodod did not start: %.300s", stderr.String())
	}
	if s.URL != "" {
		cmd.Stderr = &tail{max: 4 << 10}
		if err := cmd.Start(); err != nil {
			return "", err
		}
		return s.URL, waitAccepting(s.URL, cmd)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no listening line (%v): %.300s", err, stderr.String())
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		return "", fmt.Errorf("unexpected first line %q", line)
	}
	return "http://" + addr + "/mcp", nil // the peers serve any path
}
