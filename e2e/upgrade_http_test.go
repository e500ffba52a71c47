package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// keepAliveClient posts 2026 echo calls on one kept-alive connection at a
// time, as fast as they are answered, counting what was answered right and
// what failed (a transport error, another status, another body).
type keepAliveClient struct {
	name   string
	client *http.Client
	url    string

	ok, reused atomic.Int64
	mu         sync.Mutex
	failures   []string
}

func (c *keepAliveClient) run(stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		text := fmt.Sprintf("%s call %d", c.name, n)
		body := `{"jsonrpc":"2.0","id":` + fmt.Sprint(n) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text +
			`"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				c.reused.Add(1)
			}
		}}
		req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		resp, err := c.client.Do(req)
		if err != nil {
			c.fail(fmt.Sprintf("%s: %v", text, err))
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"`+text+`"`) {
			c.fail(fmt.Sprintf("%s: %d %v %.200s", text, resp.StatusCode, err, b))
			continue
		}
		c.ok.Add(1)
	}
}

func (c *keepAliveClient) fail(what string) {
	c.mu.Lock()
	c.failures = append(c.failures, what)
	c.mu.Unlock()
}

// TestHTTPKeepAliveAcrossUpgrades (docs/protocol.md §13.7): clients posting
// 2026 calls back to back on kept-alive connections, across two upgrades,
// see no failure: each old daemon answers every request it read, and closes
// a connection only right after an answer that says so (Connection: close),
// never while a client may be sending on it. At least 2,026 calls are
// answered, some on reused connections, and each daemon serves some.
func TestHTTPKeepAliveAcrossUpgrades(t *testing.T) {
	d := startDaemon(t, "[http]\nlisten = \"127.0.0.1:0\"\n", nil)
	st := d.statusJSON(t)
	url := "http://" + st.HTTP.Listen + st.HTTP.Path
	var clients []*keepAliveClient
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		t.Cleanup(tr.CloseIdleConnections)
		c := &keepAliveClient{name: fmt.Sprintf("client %d", i), client: &http.Client{Transport: tr, Timeout: answerWithin}, url: url}
		clients = append(clients, c)
		wg.Go(func() { c.run(stop) })
	}
	answered := func() (n int64) {
		for _, c := range clients {
			n += c.ok.Load()
		}
		return n
	}
	awaitAnswered := func(what string, n int64) {
		t.Helper()
		if !eventually.Within(2*answerWithin, func() bool { return answered() >= n }) {
			t.Fatalf("%s: %d calls answered, want %d", what, answered(), n)
		}
	}
	awaitAnswered("before the upgrades", 300)
	first := d.upgrade(t)
	if status := d.waitExit(t, answerWithin); status != 0 {
		t.Errorf("the first daemon exited %d, want 0", status)
	}
	awaitAnswered("after the first upgrade", answered()+300)
	d.upgrade(t)
	if !waitGone(first, answerWithin) {
		t.Errorf("the second daemon (pid %d) did not exit after the second upgrade", first)
	}
	awaitAnswered("after the second upgrade", max(answered()+300, 2026))
	close(stop)
	wg.Wait()
	var reused int64
	for _, c := range clients {
		reused += c.reused.Load()
		for _, f := range c.failures {
			t.Errorf("failed: %s", f)
		}
	}
	if reused == 0 {
		t.Error("no connection was reused: keep-alive was not exercised")
	}
	t.Logf("%d calls answered across two upgrades, %d on reused connections", answered(), reused)
	d.stopSuccessor(t)
}
