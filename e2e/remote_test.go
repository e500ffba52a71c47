//lint:file-ignore SA1019 server-everything relays the sampling the SDK deprecates (SEP-2577).

package e2e_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Remote MCP servers hosted by snodod (docs/upstreams.md §9): the
// reference server from npm in its streamableHttp and sse modes, and the
// official Go SDK's server in both eras (internal/fakeremote) over HTTP and
// over HTTPS with a private CA, all started by the test on loopback and
// reached by the official Go SDK and TypeScript SDK clients through
// snodod connect NAME, the aggregated view, and snodod's HTTP endpoint.

var (
	fakeRemoteOnce sync.Once
	fakeRemoteBin  string
	fakeRemoteErr  error
)

// fakeRemote builds internal/fakeremote/cmd/fakeremote once, beside
// snodod's binary.
func fakeRemote(t *testing.T) string {
	t.Helper()
	fakeRemoteOnce.Do(func() {
		fakeRemoteBin = filepath.Join(filepath.Dir(binary), "fakeremote")
		out, err := exec.Command("go", "build", "-o", fakeRemoteBin, "github.com/snodod/snodod/internal/fakeremote/cmd/fakeremote").CombinedOutput()
		if err != nil {
			fakeRemoteErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if fakeRemoteErr != nil {
		t.Fatalf("building fakeremote: %v", fakeRemoteErr)
	}
	return fakeRemoteBin
}

// startFakeRemote runs fakeremote with args until the test ends and
// returns the URL it serves.
func startFakeRemote(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(fakeRemote(t), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fakeremote %v printed no URL: %v\n%s", args, err, stderr.String())
	}
	return strings.TrimSpace(line)
}

// startEverythingHTTP runs server-everything in mode (streamableHttp,
// sse) on a loopback port until the test ends and returns its endpoint's
// URL.
func startEverythingHTTP(t *testing.T, mode string) string {
	t.Helper()
	entry := npmServer(t, "server-everything")
	node, dir := nodeClient(t)
	port := freePort(t)
	cmd := exec.Command(node, "--import", filepath.Join(dir, "loopback.mjs"), entry, mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server-everything %s:\n%s", mode, out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything %s does not listen on %s:\n%s", mode, port, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	path := "/mcp"
	if mode == "sse" {
		path = "/sse"
	}
	return "http://127.0.0.1:" + port + path
}

func TestRemoteServers(t *testing.T) {
	everythingHTTP, everythingSSE := startEverythingHTTP(t, "streamableHttp"), startEverythingHTTP(t, "sse")
	legacy, modern := startFakeRemote(t, "-name", "go-legacy"), startFakeRemote(t, "-mode", "stateless", "-name", "go-2026")
	sse := startFakeRemote(t, "-mode", "sse", "-name", "go-sse")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	secure := startFakeRemote(t, "-name", "go-tls", "-tls", caFile)
	config := fmt.Sprintf(`
[mcpServers.everything-http]
url = %q

[mcpServers.everything-sse]
type = "sse"
url = %q

[mcpServers.go-legacy]
url = %q
headers = { X-Test = "from snodod" }

[mcpServers.go-2026]
url = %q

[mcpServers.go-sse]
url = %q
type = "sse"

[mcpServers.go-tls]
url = %q
tls_ca_file = %q

[mcpServers.untrusted]
url = %q
`, everythingHTTP, everythingSSE, legacy, modern, sse, secure, caFile, secure)
	d := &npmDaemon{daemonProc: startDaemon(t, config, nil, "--http", "127.0.0.1:0")}

	for _, name := range []string{"everything-http", "everything-sse"} {
		for _, version := range []string{"2025-11-25", "2025-06-18"} {
			t.Run(name+" passed through at "+version, func(t *testing.T) { everythingPassThrough(t, d.connect(t, name, version, "")) })
		}
		t.Run(name+" passed through over snodod's HTTP", func(t *testing.T) { everythingPassThrough(t, d.connectHTTP(t, name, "2025-11-25")) })
		t.Run(name+" to a 2026 client", func(t *testing.T) {
			c := d.connect(t, name, v2026, "")
			if got := resultText(c.call(t, "echo", map[string]any{"message": "stateless"})); !strings.Contains(got, "stateless") {
				t.Errorf("echo %q", got)
			}
			if got := resultText(c.call(t, "trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 10})); !strings.Contains(got, "sampled by the Go client") {
				t.Errorf("parked sampling: %q", got)
			}
		})
	}
	t.Run("the Go SDK's servers, aggregated", func(t *testing.T) {
		for _, version := range []string{"2025-11-25", v2026} {
			c := d.connect(t, "", version, "")
			tools := toolNames(t, c.cs)
			for _, server := range []string{"go-legacy", "go-2026", "go-sse", "go-tls"} {
				if !slices.Contains(tools, server+"__echo") {
					t.Errorf("tools lack %s__echo: %v", server, tools)
					continue
				}
				if got := resultText(c.call(t, server+"__echo", map[string]any{"text": "hi"})); got != server+": hi" {
					t.Errorf("%s__echo at %s: %q", server, version, got)
				}
			}
			if got := resultText(c.call(t, "go-legacy__headerecho", nil)); got != "from snodod" {
				t.Errorf("the configured header: %q", got)
			}
			params := &mcp.CallToolParams{Name: "go-2026__steps", Arguments: map[string]any{"steps": 3}}
			params.SetProgressToken("p")
			if res, err := c.cs.CallTool(t.Context(), params); err != nil || res.IsError {
				t.Errorf("steps: %v %+v", err, res)
			}
		}
	})
	t.Run("a server whose certificate is of an unknown authority", func(t *testing.T) {
		c := d.connect(t, "", "2025-11-25", "")
		res, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "untrusted__echo"})
		msg := fmt.Sprint(err)
		if res != nil {
			msg = resultText(res)
		}
		if !strings.Contains(msg, "certificate signed by unknown authority") || !strings.Contains(msg, "cannot reach "+secure) {
			t.Errorf("untrusted: %s", msg)
		}
	})
	st := d.statusJSON(t)
	t.Run("TypeScript SDK client", func(t *testing.T) { typeScriptEverything(t, d, binary, "everything-http") })
	t.Run("TypeScript SDK client over snodod's HTTP", func(t *testing.T) {
		typeScriptEverything(t, d, "--http", "http://"+st.HTTP.Listen+st.HTTP.Path+"/everything-sse")
	})
	st = d.statusJSON(t)
	for _, r := range st.Upstreams {
		if r.URL == "" || r.PID != 0 {
			t.Errorf("status row %s: url %q pid %d", r.Name, r.URL, r.PID)
		}
	}
	out, err := d.command("status").Output()
	if err != nil || !strings.Contains(string(out), "go-legacy: remote "+legacy) {
		t.Errorf("snodod status: %v\n%s", err, out)
	}
}

// TestRemoteProxy: the daemon reaches a remote server through the proxy
// HTTP_PROXY names (a host only the proxy can resolve), and directly for a
// host NO_PROXY lists.
func TestRemoteProxy(t *testing.T) {
	target := startFakeRemote(t, "-name", "proxied")
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An absolute-form request for mcp.test: sent on to the server.
		if r.URL.Hostname() != "mcp.test" {
			http.Error(w, "this proxy serves mcp.test only", http.StatusBadGateway)
			return
		}
		proxied.Add(1)
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Host, out.Host = u.Host, u.Host // the server guards its loopback Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		flusher, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				if flusher != nil {
					flusher.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(proxy.Close)
	config := fmt.Sprintf(`
[mcpServers.proxied]
url = "http://mcp.test:%s/mcp"
allow_insecure_http = true
[mcpServers.direct]
url = "http://mcp-direct.test:%s/mcp"
allow_insecure_http = true
`, u.Port(), u.Port())
	d := &npmDaemon{daemonProc: startDaemon(t, config, []string{"HTTP_PROXY=" + proxy.URL, "NO_PROXY=mcp-direct.test"})}
	c := d.connect(t, "", "2025-11-25", "")
	if got := resultText(c.call(t, "proxied__echo", map[string]any{"text": "via the proxy"})); got != "proxied: via the proxy" {
		t.Errorf("through the proxy: %q", got)
	}
	if proxied.Load() == 0 {
		t.Error("no request went through the proxy")
	}
	before := proxied.Load()
	res, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "direct__echo"})
	msg := fmt.Sprint(err)
	if res != nil {
		msg = resultText(res)
	}
	if !strings.Contains(msg, "cannot reach http://mcp-direct.test:") || proxied.Load() != before {
		t.Errorf("a NO_PROXY host went through the proxy, or: %s", msg)
	}
}
