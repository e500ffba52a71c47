package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/audit"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/internal/syncbuf"
	"github.com/snodod/snodod/server"
)

// auditCatalog is the demo catalog and a prompt, for a get.
func auditCatalog(s *server.Server) {
	demo(s)
	s.AddPrompt(&server.Prompt{Name: "greet", Arguments: []server.PromptArgument{{Name: "who"}, {Name: "api_key"}}},
		func(_ context.Context, req *server.GetPromptRequest) (*server.GetPromptResult, error) {
			return &server.GetPromptResult{Messages: []server.PromptMessage{{Role: "user", Content: server.TextContent("hello")}}}, nil
		})
}

// sdkSession connects a go-sdk client to the session socket.
func sdkSession(t *testing.T, path string) *mcp.ClientSession {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "audit-test", Version: "1.2.3"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: c, Writer: c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// auditRecords reads the audit file once the daemon has stopped (Run
// closes the log: every record is written).
func auditRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// A real client's call, read and get are each one line, field by field:
// the peer is the test process, the client its clientInfo, the digest
// the same for the same arguments whatever their order; arguments are
// absent by default, and with audit.arguments present with secret keys
// and config secrets redacted.
func TestAuditLog(t *testing.T) {
	for _, withArgs := range []bool{false, true} {
		t.Run(map[bool]string{false: "digest", true: "arguments"}[withArgs], func(t *testing.T) {
			dir := shortDir(t)
			keyFile := filepath.Join(dir, "key")
			const secret = "s3cr3t-state-key-0123456789abcdefghijklmnop"
			if err := os.WriteFile(keyFile, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "audit.log")
			cfg := testConfig(t, dir, map[string]any{"audit.file": file, "audit.arguments": withArgs, "server.state_key_file": keyFile})
			r := startDaemon(t, cfg, Options{Catalog: auditCatalog})
			cs := sdkSession(t, cfg.Daemon.Socket)
			ctx := context.Background()
			start := time.Now().UTC().Truncate(time.Millisecond)
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi " + secret, "password": "hunter2", "n": 1}}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: UpstreamsURI}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "bob", "api_key": "k-123456"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch"}); err == nil {
				t.Fatal("an unknown tool was called")
			}
			cs.Close()
			r.stop()
			if err := r.wait(t); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", st.Mode().Perm())
			}
			recs := auditRecords(t, file)
			if len(recs) != 4 {
				t.Fatalf("%d records, want 4: %+v", len(recs), recs)
			}
			exe, _ := os.Executable()
			for i, rec := range recs {
				if rec.Time.Before(start) || rec.Time.After(time.Now()) || rec.Time.Location() != time.UTC {
					t.Errorf("record %d: time %v, not since %v in UTC", i, rec.Time, start)
				}
				if rec.Session == 0 || rec.Session != recs[0].Session {
					t.Errorf("record %d: session %d, want the first's, not 0", i, rec.Session)
				}
				if rec.Peer == nil || rec.Peer.UID != os.Geteuid() || rec.Peer.PID != os.Getpid() || rec.Peer.Exe != exe {
					t.Errorf("record %d: peer %+v, want uid %d pid %d exe %s", i, rec.Peer, os.Geteuid(), os.Getpid(), exe)
				}
				if rec.Client == nil || *rec.Client != (audit.Client{Name: "audit-test", Version: "1.2.3"}) {
					t.Errorf("record %d: client %+v", i, rec.Client)
				}
				if rec.View != "" || rec.Server != "" {
					t.Errorf("record %d: view %q server %q, want the aggregated view's own", i, rec.View, rec.Server)
				}
				if rec.DurationMS <= 0 {
					t.Errorf("record %d: duration_ms %v", i, rec.DurationMS)
				}
			}
			call, read, get, bad := recs[0], recs[1], recs[2], recs[3]
			wantDigest, _ := audit.Digest(json.RawMessage(`{"n":1,"password":"hunter2","text":"hi ` + secret + `"}`))
			if call.Method != "tools/call" || call.Tool != "echo" || call.Outcome != "ok" || call.ArgsDigest != wantDigest {
				t.Errorf("call: %+v, want digest %s", call, wantDigest)
			}
			if read.Method != "resources/read" || read.URI != UpstreamsURI || read.Outcome != "ok" || read.ArgsDigest != "" || read.Arguments != nil {
				t.Errorf("read: %+v", read)
			}
			if get.Method != "prompts/get" || get.Prompt != "greet" || get.Outcome != "ok" || !strings.HasPrefix(get.ArgsDigest, "sha256:") || len(get.ArgsDigest) != 71 {
				t.Errorf("get: %+v", get)
			}
			if bad.Tool != "nosuch" || bad.Outcome != "error" || bad.Code != -32602 {
				t.Errorf("unknown tool: %+v", bad)
			}
			raw, _ := os.ReadFile(file)
			if !withArgs {
				if call.Arguments != nil || get.Arguments != nil || strings.Contains(string(raw), "hunter2") || strings.Contains(string(raw), `"arguments"`) {
					t.Errorf("arguments recorded without audit.arguments:\n%s", raw)
				}
				return
			}
			if got, want := string(call.Arguments), `{"n":1,"password":"[redacted]","text":"hi [redacted]"}`; got != want {
				t.Errorf("call arguments %s, want %s", got, want)
			}
			if got, want := string(get.Arguments), `{"api_key":"[redacted]","who":"bob"}`; got != want {
				t.Errorf("get arguments %s, want %s", got, want)
			}
			for _, s := range []string{secret, "hunter2", "k-123456"} {
				if strings.Contains(string(raw), s) {
					t.Errorf("the log holds the secret %q:\n%s", s, raw)
				}
			}
		})
	}
}

// A reload applies [audit]: off to a file, to another file; and with the
// settings unchanged it reopens the file (logrotate moved it).
func TestAuditReload(t *testing.T) {
	dir := shortDir(t)
	first, second := filepath.Join(dir, "first.log"), filepath.Join(dir, "second.log")
	next := map[string]any{}
	r := startDaemon(t, testConfig(t, dir, nil), Options{Reload: func() (*config.Config, error) { return loadConfig(dir, next) }})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	id := 10
	call := func() {
		t.Helper()
		id++
		if a := c.call(id, "echo", `{"text":"x"}`); !strings.Contains(a, `"result"`) {
			t.Fatalf("call: %s", a)
		}
	}
	count := func(path string) int {
		t.Helper()
		r.d.syncAudit()
		b, err := os.ReadFile(path)
		if err != nil {
			return -1
		}
		return strings.Count(string(b), "\n")
	}
	call()
	if n := count(first); n != -1 {
		t.Fatalf("audit off, yet %s has %d lines", first, n)
	}
	next["audit.file"] = first
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	call()
	if n := count(first); n != 1 {
		t.Fatalf("after the reload that set audit.file: %d lines, want 1", n)
	}
	// Unchanged settings: SIGHUP's reload reopens the file.
	if err := os.Rename(first, first+".1"); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	call()
	if a, b := count(first+".1"), count(first); a != 1 || b != 1 {
		t.Fatalf("after logrotate's move and a reload: moved %d, new %d lines; want 1 and 1", a, b)
	}
	next["audit.file"] = second
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	call()
	if a, b := count(first), count(second); a != 1 || b != 1 {
		t.Fatalf("after the reload to another file: %d and %d lines, want 1 and 1", a, b)
	}
	delete(next, "audit.file")
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	call()
	if n := count(second); n != 1 {
		t.Fatalf("audit off again, yet %d lines", n)
	}
}

// An HTTP client on loopback is recorded with the uid the listener judged
// it by: a go-sdk client's legacy session, and a 2026 POST with its
// clientInfo in _meta.
func TestAuditHTTPPeer(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "audit.log")
	r := startDaemon(t, testConfig(t, dir, map[string]any{"http.listen": "127.0.0.1:0", "audit.file": file}), Options{})
	url := "http://" + r.d.Status().HTTP.Listen + "/mcp"
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-http", Version: "9"}, nil)
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "a"}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	resp := postMCP(t, url, "tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`+
		`"io.modelcontextprotocol/clientInfo":{"name":"raw-2026","version":"0.1"}}}}`, "Mcp-Name", "echo")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("2026 POST: %d", resp.StatusCode)
	}
	r.d.syncAudit()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec audit.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records:\n%s", len(recs), b)
	}
	for i, want := range []string{"sdk-http", "raw-2026"} {
		rec := recs[i]
		if rec.Peer == nil || rec.Peer.UID != os.Geteuid() || rec.Peer.PID != 0 || rec.Client == nil || rec.Client.Name != want || rec.Session == 0 || rec.Tool != "echo" || rec.Outcome != "ok" {
			t.Errorf("record %d: %+v peer %+v client %+v", i, rec, rec.Peer, rec.Client)
		}
	}
}

// A relayed call names its server: in the aggregated view (the tool with
// its prefix) and in the server's pass-through view.
func TestAuditRelayed(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "audit.log")
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`
[daemon]
socket = %q
shutdown_grace = "2s"

[http]
listen = "127.0.0.1:0"

[audit]
file = %q

[mcpServers.fake]
command = %q
start = "eager"
`, filepath.Join(dir, "s.sock"), file, fakebuild.Build(t))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, cfg, Options{StateDir: filepath.Join(dir, "state")})
	eventually.True(t, "the fake to be ready", func() bool {
		ups := r.d.Status().Upstreams
		return len(ups) == 1 && ups[0].State == control.StateReady
	})
	c := dialSession(t, cfg.Daemon.Socket)
	c.initialize()
	if a := c.call(2, "fake__echo", `{"text":"a"}`); !strings.Contains(a, `"result"`) {
		t.Fatalf("aggregated call: %s", a)
	}
	url := "http://" + r.d.Status().HTTP.Listen + "/mcp/fake"
	resp := postMCP(t, url, "tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, "Mcp-Name", "echo")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pass-through POST: %d", resp.StatusCode)
	}
	r.d.syncAudit()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec audit.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records:\n%s", len(recs), b)
	}
	if rec := recs[0]; rec.View != "" || rec.Server != "fake" || rec.Tool != "fake__echo" || rec.Outcome != "ok" {
		t.Errorf("aggregated: %+v", rec)
	}
	if rec := recs[1]; rec.View != "fake" || rec.Server != "fake" || rec.Tool != "echo" || rec.Outcome != "ok" {
		t.Errorf("pass-through: %+v", rec)
	}
}

// With the audit file a FIFO nobody reads, the writer blocks once the
// pipe is full; calls are still answered at once, the records beyond the
// queue are dropped and counted (snodod_audit_dropped_total), and the
// log says so once.
func TestAuditDropsWhenTheWriterBlocks(t *testing.T) {
	dir := shortDir(t)
	fifo := filepath.Join(dir, "audit.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened for reading (without blocking) so that the daemon's open for
	// writing does not wait; read only at the end.
	rd, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	t.Cleanup(func() { <-copied; rd.Close() }) // after the daemon's stop
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r := startDaemon(t, testConfig(t, dir, map[string]any{"audit.file": fifo, "admin.listen": "127.0.0.1:0"}), Options{Logger: logger})
	// Before the daemon's stop (a cleanup registered later runs first),
	// the writer is unblocked: the FIFO read to its end.
	t.Cleanup(func() {
		if err := syscall.SetNonblock(int(rd.Fd()), false); err != nil {
			t.Error(err)
		}
		go func() {
			defer close(copied)
			io.Copy(io.Discard, rd) // until the daemon closes its end
		}()
	})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	// More calls than the pipe (64 KiB, a few hundred lines) and the
	// queue hold, 32 in flight.
	const calls = audit.DefaultQueue + 2000
	start := time.Now()
	sent, got := 0, 0
	var line []byte
	for got < calls {
		for ; sent < calls && sent-got < 32; sent++ {
			line = fmt.Appendf(line[:0], `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`+"\n", sent+10)
			if _, err := c.c.Write(line); err != nil {
				t.Fatal(err)
			}
		}
		if a := c.line(); !strings.Contains(a, `"result"`) {
			t.Fatalf("answer %d: %s", got, a)
		}
		got++
	}
	elapsed := time.Since(start)
	dropped := r.d.audit.Dropped()
	if dropped == 0 || dropped > calls {
		t.Fatalf("%d calls in %v with the writer blocked: %d dropped", calls, elapsed, dropped)
	}
	_, body := get(t, http.DefaultClient, "http://"+r.d.adminAddr()+"/metrics")
	if want := fmt.Sprintf("snodod_audit_dropped_total %d", dropped); !strings.Contains(body, want) {
		t.Errorf("/metrics has no %q", want)
	}
	if n := strings.Count(logs.String(), "audit log queue full"); n != 1 {
		t.Errorf("the drop logged %d times, want once (at most once a minute):\n%s", n, logs.String())
	}
	t.Logf("%d calls in %v, %d records dropped", calls, elapsed, dropped)
}
