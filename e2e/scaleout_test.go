package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// The scale-out test: three `snodod serve` nodes behind nginx, configured
// by the two blocks of docs/scale-out.md (its example ports replaced by
// loopback ports of the test's own).

const (
	scaleHost  = "mcp.example.com" // the public name of docs/scale-out.md
	modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
)

// docBlock returns the fenced block after marker in docs/scale-out.md.
func docBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "scale-out.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- scale-out: "+marker+" -->")
	if !ok {
		t.Fatalf("docs/scale-out.md has no %q block", marker)
	}
	_, rest, _ = strings.Cut(rest, "```")
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("docs/scale-out.md: the %q block is not closed", marker)
	}
	return block
}

// nginxWorker returns nginx's user directive and the uid its workers run
// as, which the nodes must allow (docs/scale-out.md's allowed_uids): as
// root, www-data as Debian's nginx.conf has it (nobody where there is no
// www-data); otherwise this process's own uid, which nginx keeps.
func nginxWorker(t *testing.T) (directive, uid string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", strconv.Itoa(os.Geteuid())
	}
	for _, name := range []string{"www-data", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		g, err := user.LookupGroupId(u.Gid)
		if err != nil {
			continue
		}
		return fmt.Sprintf("user %s %s;", u.Username, g.Name), u.Uid
	}
	t.Fatal("no www-data or nobody user for nginx's workers")
	return "", ""
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// cluster is the nodes and nginx in front of them.
type cluster struct {
	nodes []*daemonProc
	addrs []string // each node's host:port
	url   string   // nginx's endpoint
	log   string   // nginx's access log
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			nginx, err = "/usr/sbin/nginx", nil
		}
	}
	if err != nil {
		skipOrFail(t, "the scale-out test needs nginx (Debian: apt-get install nginx-light; .ci/run installs it): "+err.Error())
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "state.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("shared-state-key-", 4)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodeConfig := docBlock(t, "node config")
	worker, workerUID := nginxWorker(t)
	c := &cluster{}
	for i := 1; i <= 3; i++ {
		cfg := strings.NewReplacer(`listen = "127.0.0.1:18101"`, `listen = "127.0.0.1:0"`,
			`node_id = "n1"`, fmt.Sprintf(`node_id = "n%d"`, i),
			`"/etc/snodod/state.key"`, fmt.Sprintf("%q", key),
			"allowed_uids = [33]", "allowed_uids = ["+workerUID+"]").Replace(nodeConfig)
		d := startDaemon(t, cfg, nil)
		st := d.statusJSON(t)
		if st.HTTP == nil || st.HTTP.NodeID != fmt.Sprintf("n%d", i) {
			t.Fatalf("node %d: %+v", i, st.HTTP)
		}
		c.nodes = append(c.nodes, d)
		c.addrs = append(c.addrs, st.HTTP.Listen)
	}
	front := "127.0.0.1:" + freePort(t)
	conf := strings.NewReplacer("127.0.0.1:18101", c.addrs[0], "127.0.0.1:18102", c.addrs[1],
		"127.0.0.1:18103", c.addrs[2], "127.0.0.1:18100", front).Replace(docBlock(t, "nginx"))
	c.log = filepath.Join(dir, "access.log")
	main := fmt.Sprintf(`daemon off;
%[4]s
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 2048; }
http {
    log_format mcp '$request_method $status $upstream_addr $http_mcp_method $http_mcp_session_id';
    access_log %[2]s mcp;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[3]s
}
`, dir, c.log, conf, worker)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("nginx:\n%s", stderr.String())
		}
	})
	c.url = "http://" + front + "/mcp"
	if !eventually.Within(10*time.Second, func() bool {
		conn, err := net.Dial("tcp", front)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}) {
		t.Fatalf("nginx does not listen on %s:\n%s", front, stderr.String())
	}
	return c
}

// mcpPost sends one JSON-RPC message; a 2026 one when meta, with the
// headers a 2026 client sends (Mcp-Name from params.name).
func mcpPost(t *testing.T, url, session, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = scaleHost
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	var env struct {
		Method string
		Params struct{ Name string }
	}
	_ = json.Unmarshal([]byte(body), &env)
	if strings.Contains(body, "io.modelcontextprotocol/protocolVersion") {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", env.Method)
		if env.Params.Name != "" {
			req.Header.Set("Mcp-Name", env.Params.Name)
		}
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func echoCall(id int, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q},%s}}`, id, text, modernMeta)
}

// legacyInit initializes a session through url and returns its id.
func legacyInit(t *testing.T, url string) string {
	t.Helper()
	status, h, body := mcpPost(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	id := h.Get("Mcp-Session-Id")
	if status != 200 || id == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := mcpPost(t, url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	return id
}

var sessionTag = regexp.MustCompile(`^(n[123])\.[0-9a-f]{32}$`)

// TestScaleOut: 2026 traffic spreads over every node and an MRTR retry may
// land on any; legacy sessions stay on their node; a listen stream through
// nginx gets a list change within a second; killing a node loses only its
// legacy sessions, whose clients get 404 and initialize again.
func TestScaleOut(t *testing.T) {
	c := startCluster(t)

	t.Run("2026 calls spread", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan string, 300)
		for w := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					text := fmt.Sprintf("w%d-%d", w, i)
					if status, _, body := mcpPost(t, c.url, "", echoCall(i, text)); status != 200 || !strings.Contains(body, `"text":"`+text+`"`) {
						errs <- fmt.Sprintf("%d %s", status, body)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		total := uint64(0)
		for i, d := range c.nodes {
			n := d.statusJSON(t).HTTP.Requests2026
			t.Logf("node n%d served %d of the 300 calls", i+1, n)
			if n == 0 {
				t.Errorf("node n%d served none of the 300 calls", i+1)
			}
			total += n
		}
		if total != 300 {
			t.Errorf("the nodes served %d calls, want 300", total)
		}
		// Every node lists the tools identically.
		list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
		var first string
		for i, addr := range c.addrs {
			_, _, body := mcpPost(t, "http://"+addr+"/mcp", "", list)
			if i == 0 {
				first = body
			} else if body != first {
				t.Errorf("node n%d lists tools otherwise than n1:\n%s\n%s", i+1, body, first)
			}
		}
	})

	t.Run("MRTR retry on another node", func(t *testing.T) {
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_input_required_result_elicitation","arguments":{},` + modernMeta + `}}`
		_, _, body := mcpPost(t, "http://"+c.addrs[0]+"/mcp", "", call)
		var round struct {
			Result struct {
				ResultType    string `json:"resultType"`
				RequestState  string `json:"requestState"`
				InputRequests map[string]struct {
					Params struct {
						RequestedSchema struct {
							Properties map[string]struct{ Type string }
						}
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &round); err != nil || round.Result.ResultType != "input_required" {
			t.Fatalf("round 1 on n1: %s", body)
		}
		answers := map[string]any{}
		for key, req := range round.Result.InputRequests {
			answers[key] = map[string]any{"action": "accept", "content": fillForm(req.Params.RequestedSchema)}
		}
		ab, _ := json.Marshal(answers)
		retry := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_input_required_result_elicitation","arguments":{},"inputResponses":%s,"requestState":%q,%s}}`,
			ab, round.Result.RequestState, modernMeta)
		for _, addr := range []string{c.addrs[1], c.addrs[2]} {
			if _, _, body := mcpPost(t, "http://"+addr+"/mcp", "", retry); !strings.Contains(body, `"resultType":"complete"`) || !strings.Contains(body, "Gopher") {
				t.Errorf("round 2 on %s: %s", addr, body)
			}
		}
		// And through nginx, whichever node it picks.
		if _, _, body := mcpPost(t, c.url, "", retry); !strings.Contains(body, `"resultType":"complete"`) {
			t.Errorf("round 2 through nginx: %s", body)
		}
	})

	var sessions []string
	t.Run("legacy sessions stay on their nodes", func(t *testing.T) {
		for len(sessions) < 2 {
			id := legacyInit(t, c.url)
			if !sessionTag.MatchString(id) {
				t.Fatalf("session id %q has no node tag", id)
			}
			if len(sessions) == 1 && sessionTag.FindStringSubmatch(sessions[0])[1] == sessionTag.FindStringSubmatch(id)[1] {
				continue // round robin gave the same node: initialize once more
			}
			sessions = append(sessions, id)
		}
		for _, id := range sessions {
			for i := range 10 {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s"}}}`, i+2)
				if status, _, resp := mcpPost(t, c.url, id, body); status != 200 || !strings.Contains(resp, `"text":"s"`) {
					t.Fatalf("session %s call %d: %d %s", id, i, status, resp)
				}
			}
		}
		// nginx sent every request of a session to its node. It writes a
		// request's access-log line once the response is sent, so the
		// last lines may still be on their way: read until they are all
		// there, for at most a few seconds.
		var lines []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			b, err := os.ReadFile(c.log)
			if err != nil {
				t.Fatal(err)
			}
			lines = lines[:0]
			for line := range strings.SplitSeq(string(b), "\n") {
				if f := strings.Fields(line); len(f) >= 5 && sessionTag.MatchString(f[len(f)-1]) {
					lines = append(lines, line)
				}
			}
			if len(lines) >= 22 || time.Now().After(deadline) { // two initialized notifications and 20 calls
				break
			}
		}
		for _, line := range lines {
			f := strings.Fields(line)
			node := sessionTag.FindStringSubmatch(f[len(f)-1])[1]
			if want := c.addrs[node[1]-'1']; f[2] != want {
				t.Errorf("a request of a %s session went to %s: %s", node, f[2], line)
			}
		}
		if len(lines) < 22 {
			t.Errorf("the access log shows %d requests with a session id, want at least 22", len(lines))
		}
	})

	t.Run("listen through nginx", func(t *testing.T) {
		req, err := http.NewRequest("POST", c.url, strings.NewReader(`{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = scaleHost
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"} {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := make(chan string, 8)
		go func() {
			defer close(events)
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					events <- data
				}
				if err != nil {
					return
				}
			}
		}()
		select {
		case ack := <-events:
			if !strings.Contains(ack, "acknowledged") {
				t.Fatalf("first event: %s", ack)
			}
		case <-time.After(answerWithin):
			t.Fatal("no acknowledgement through nginx")
		}
		// A stream sees its own node's changes: change every node.
		start := time.Now()
		trigger := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_trigger_tool_change","arguments":{},` + modernMeta + `}}`
		// The triggers finish before the nodes stop: a post failing after
		// the subtest ended would fail a finished test.
		var posts sync.WaitGroup
		defer posts.Wait()
		for _, addr := range c.addrs {
			posts.Go(func() { mcpPost(t, "http://"+addr+"/mcp", "", trigger) })
		}
		select {
		case ev := <-events:
			if !strings.Contains(ev, "notifications/tools/list_changed") || !strings.Contains(ev, `"l1"`) {
				t.Fatalf("event: %s", ev)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the list change took %v through nginx, want under a second (the conformance window)", took)
			}
		case <-time.After(answerWithin):
			t.Fatal("no list change through nginx")
		}
	})

	t.Run("a node dies", func(t *testing.T) {
		if len(sessions) != 2 {
			skipOrFail(t, "needs the sessions of the previous subtest")
		}
		victim := sessionTag.FindStringSubmatch(sessions[0])[1]
		d := c.nodes[victim[1]-'1']
		_ = d.cmd.Process.Kill()
		<-d.exited
		ping := `{"jsonrpc":"2.0","id":50,"method":"ping"}`
		if status, _, body := mcpPost(t, c.url, sessions[0], ping); status != 404 || !strings.Contains(body, "Session not found") {
			t.Fatalf("the dead node's session: %d %s, want 404", status, body)
		}
		if status, _, body := mcpPost(t, c.url, sessions[1], ping); status != 200 {
			t.Fatalf("the other session: %d %s", status, body)
		}
		id := legacyInit(t, c.url)
		if node := sessionTag.FindStringSubmatch(id)[1]; node == victim {
			t.Fatalf("re-initialized on the dead node %s", node)
		}
		if status, _, body := mcpPost(t, c.url, id, ping); status != 200 {
			t.Fatalf("the new session: %d %s", status, body)
		}
		for i := range 30 {
			if status, _, body := mcpPost(t, c.url, "", echoCall(i, "after")); status != 200 {
				t.Fatalf("2026 call %d after the death: %d %s", i, status, body)
			}
		}
	})
}
