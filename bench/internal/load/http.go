package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP scenario: tools/call echo over Streamable HTTP from concurrent
// clients on keep-alive connections, for a fixed time, against `snodod
// serve --demo --http` and the SDKs' streamable servers (stateless).

// HTTPServer is one server of the HTTP scenario.
type HTTPServer struct {
	Name    string
	Command []string
	Env     []string
	// Snodod says the server is snodod serve: its address comes from
	// `snodod status`, the peers' from their "listening" line.
	Snodod  bool
	Body    string            // the request
	Headers map[string]string // sent with it
}

// HTTPResult is what one server did.
type HTTPResult struct {
	Server      string
	Calls       int64
	Errors      int64
	CallsPerSec float64
	CPUPerCall  float64 // µs of the server's CPU (exact, schedstat)
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
	return HTTPServer{Name: "snodod", Snodod: true, Body: HTTPModernCall, Headers: HTTPModernHeaders,
		Command: []string{snodod, "serve", "--demo", "--http", "127.0.0.1:0", "--log-level", "warn", "--socket", filepath.Join(dir, "s.sock")},
		Env:     []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
}

// RunHTTP loads s with clients concurrent clients for d.
func RunHTTP(s HTTPServer, clients int, d time.Duration) HTTPResult {
	res := HTTPResult{Server: s.Name, CallsPerSec: nan(), CPUPerCall: nan()}
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Env = append(os.Environ(), s.Env...)
	url, err := startHTTP(s, cmd)
	defer func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	call := func() error {
		req, err := http.NewRequest("POST", url, strings.NewReader(s.Body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range s.Headers {
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
			return fmt.Errorf("%d %.200s", resp.StatusCode, b)
		}
		return nil
	}
	for range clients { // every connection once, and a check that calls work
		if err := call(); err != nil {
			res.Problems = append(res.Problems, "warm-up call: "+err.Error())
			return res
		}
	}
	before, err := ProcUsage(cmd.Process.Pid)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	var calls, errs atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := call(); err != nil {
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
	after, err := ProcUsage(cmd.Process.Pid)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	res.Calls, res.Errors = calls.Load(), errs.Load()
	res.CallsPerSec = float64(res.Calls) / elapsed.Seconds()
	if res.Calls > 0 {
		res.CPUPerCall = float64(after.Sub(before).Run) / float64(time.Microsecond) / float64(res.Calls)
	}
	if e, ok := firstErr.Load().(string); ok {
		res.Problems = append(res.Problems, fmt.Sprintf("%d failed calls, the first: %s", res.Errors, e))
	}
	return res
}

// startHTTP starts cmd and finds the server's URL.
func startHTTP(s HTTPServer, cmd *exec.Cmd) (string, error) {
	if s.Snodod {
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return "", err
		}
		sock := ""
		for i, a := range cmd.Args {
			if a == "--socket" {
				sock = cmd.Args[i+1]
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			st := exec.Command(cmd.Path, "status", "--json", "--socket", sock)
			st.Env = cmd.Env
			if out, err := st.Output(); err == nil {
				var v struct{ HTTP struct{ Listen, Path string } }
				if json.Unmarshal(out, &v) == nil && v.HTTP.Listen != "" {
					return "http://" + v.HTTP.Listen + v.HTTP.Path, nil
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "", fmt.Errorf("snodod did not start: %.300s", stderr.String())
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
