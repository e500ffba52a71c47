package load

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Hosting one stdio server over Streamable HTTP:
// snodod serve with it as an upstream passed through at http.path/NAME,
// and the npm gateways supergateway and mcp-proxy in front of the same
// command. Their clients speak a legacy version with sessions, the one
// era all three serve.

// HTTPSessionVersion is the legacy version the hosting clients speak.
const HTTPSessionVersion = "2025-11-25"

// HTTPSessionCall is the echo call of a legacy session: no _meta, the
// session id in a header.
const HTTPSessionCall = HTTPLegacyCall

// HTTPSessionHeaders go with every request of a legacy session after
// initialize.
var HTTPSessionHeaders = map[string]string{"MCP-Protocol-Version": HTTPSessionVersion}

// SnododHostedHTTP is `snodod serve --http` hosting command as the
// upstream "up" and serving it passed through at http.path/up; its
// configuration and sockets are in dir.
func SnododHostedHTTP(snodod, dir string, command []string) (HTTPServer, error) {
	if err := writeUpstreamConfig(filepath.Join(dir, "config"), command); err != nil {
		return HTTPServer{}, err
	}
	s := snododServe(snodod, dir)
	s.View, s.Session, s.Body, s.Headers = "/up", HTTPSessionVersion, HTTPSessionCall, HTTPSessionHeaders
	return s, nil
}

// Supergateway is supergateway (in nodeDir's node_modules) in front of
// command on port, stateful: one child per session, as its stateless
// mode would spawn one per request. Its logging is off: at "info" it
// writes a line per message.
func Supergateway(node, nodeDir string, command []string, port int) HTTPServer {
	s := HTTPServer{Name: "supergateway", Session: HTTPSessionVersion, Body: HTTPSessionCall, Headers: HTTPSessionHeaders,
		URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}
	bin := filepath.Join(nodeDir, "node_modules", "supergateway", "dist", "index.js")
	if _, err := os.Stat(bin); err != nil {
		s.Unavailable = "supergateway is not installed (npm ci --prefix " + nodeDir + ")"
		return s
	}
	s.Command = []string{node, bin, "--stdio", shellQuote(command), "--outputTransport", "streamableHttp", "--stateful",
		"--port", strconv.Itoa(port), "--logLevel", "none"}
	return s
}

// MCPProxy is punkpeye's mcp-proxy (in nodeDir's node_modules) in front
// of command on port: one child for every session, its stream endpoint
// only, without the resumability event store (which its help advises
// against for request/response use).
func MCPProxy(node, nodeDir string, command []string, port int) HTTPServer {
	s := HTTPServer{Name: "mcp-proxy", Session: HTTPSessionVersion, Body: HTTPSessionCall, Headers: HTTPSessionHeaders,
		URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}
	bin := filepath.Join(nodeDir, "node_modules", "mcp-proxy", "dist", "bin", "mcp-proxy.mjs")
	if _, err := os.Stat(bin); err != nil {
		s.Unavailable = "mcp-proxy is not installed (npm ci --prefix " + nodeDir + ")"
		return s
	}
	s.Command = append([]string{node, bin, "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--server", "stream", "--no-eventStore", "--"}, command...)
	return s
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// servers that cannot be told to pick one and say which.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shellQuote renders command as one sh command line.
func shellQuote(command []string) string {
	q := make([]string, len(command))
	for i, a := range command {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// writeUpstreamConfig writes a snodod configuration under
// dir/snodod/config.toml hosting command as the upstream "up": started at
// once, spoken to at 2025-06-18, never pinged (pings would be work the
// direct server is not given).
func writeUpstreamConfig(dir string, command []string) error {
	quoted := make([]string, len(command)-1)
	for i, a := range command[1:] {
		quoted[i] = strconv.Quote(a)
	}
	config := fmt.Sprintf("[mcpServers.up]\ncommand = %q\nargs = [%s]\nstart = \"eager\"\nprotocol = \"2025-06-18\"\nping_interval = \"0s\"\n",
		command[0], strings.Join(quoted, ", "))
	if err := os.MkdirAll(filepath.Join(dir, "snodod"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "snodod", "config.toml"), []byte(config), 0o600)
}

// waitAccepting waits until something accepts TCP connections at u's
// host, or cmd has exited, for up to 30 s (a gateway starts its stdio
// server before it listens).
func waitAccepting(u string, cmd *exec.Cmd) error {
	parsed, err := url.Parse(u)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", parsed.Host, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		// An early exit, seen without Wait (endTree's reaps it).
		if exited(cmd.Process.Pid) {
			return fmt.Errorf("%s exited before it listened: %.300s", filepath.Base(cmd.Path), stderrOf(cmd))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listening at %s after 30 s: %.300s", parsed.Host, stderrOf(cmd))
}

func stderrOf(cmd *exec.Cmd) string {
	if t, ok := cmd.Stderr.(*tail); ok {
		return t.String()
	}
	return ""
}

// treeUsage adds up the Usage of pids, a tree's root first: of all of
// them, and of those under the root. A process under the root that has
// exited since adds nothing, and is not an error: a gateway's child may
// end.
func treeUsage(pids []int) (all, under Usage, err error) {
	for i, pid := range pids {
		u, err := ProcUsage(pid)
		if err != nil {
			if i == 0 {
				return Usage{}, Usage{}, err
			}
			continue
		}
		all = all.Add(u)
		if i > 0 {
			under = under.Add(u)
		}
	}
	return all, under, nil
}

// endTree kills cmd's process and waits for it, then kills what is left
// of its descendants (a gateway may have put its children in process
// groups of their own, and a killed gateway does not end them), by pid.
func endTree(cmd *exec.Cmd) {
	tree := processTree(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, pid := range tree[1:] {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// httpClient makes the calls of the HTTP scenarios.
type httpClient struct {
	client  *http.Client
	url     string
	headers map[string]string
}

// post sends body with the session's id (if any) and returns the answer's
// status, its Mcp-Session-Id and its body.
func (c httpClient) post(body, session string, headers map[string]string) (int, string, []byte, error) {
	req, err := http.NewRequest("POST", c.url, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b, err
}

// call sends one echo call and checks its answer.
func (c httpClient) call(body, session string) error {
	status, _, b, err := c.post(body, session, c.headers)
	if err != nil {
		return err
	}
	if status != 200 || !bytes.Contains(b, []byte(`"text":"hello"`)) {
		return fmt.Errorf("%d %.200s", status, b)
	}
	return nil
}

// open opens a legacy session at version: initialize, then
// notifications/initialized; it returns the session's id.
func (c httpClient) open(version string) (string, error) {
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"mcpbench","version":"1"}}}`
	status, id, b, err := c.post(initialize, "", nil)
	switch {
	case err != nil:
		return "", fmt.Errorf("initialize: %w", err)
	case status != 200 || !bytes.Contains(b, []byte(`"protocolVersion":"`+version+`"`)):
		return "", fmt.Errorf("initialize: %d %.200s", status, b)
	case id == "":
		return "", fmt.Errorf("initialize: no Mcp-Session-Id in the answer")
	}
	status, _, b, err = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id, c.headers)
	switch {
	case err != nil:
		return "", fmt.Errorf("notifications/initialized: %w", err)
	case status != 202:
		return "", fmt.Errorf("notifications/initialized: %d %.200s, want 202", status, b)
	}
	return id, nil
}
