package load

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sessionServer is a legacy Streamable HTTP server of one tool, strict
// about sessions: a call without a session it issued, or before its
// notifications/initialized, is refused.
func sessionServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	ready := map[string]bool{} // session id → initialized
	n := 0
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body := string(b)
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("Mcp-Session-Id")
		switch {
		case strings.Contains(body, `"initialize"`):
			n++
			id = fmt.Sprintf("s%d", n)
			ready[id] = false
			w.Header().Set("Mcp-Session-Id", id)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"%s\"}}\n\n", HTTPSessionVersion)
		case strings.Contains(body, "notifications/initialized"):
			if _, ok := ready[id]; !ok {
				http.Error(w, "no such session", http.StatusNotFound)
				return
			}
			ready[id] = true
			w.WriteHeader(http.StatusAccepted)
		case !ready[id]:
			http.Error(w, "session not initialized", http.StatusBadRequest)
		case r.Header.Get("MCP-Protocol-Version") != HTTPSessionVersion:
			http.Error(w, "no MCP-Protocol-Version", http.StatusBadRequest)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hello\"}]}}\n\n")
		}
	}))
}

func TestHTTPClientSession(t *testing.T) {
	srv := sessionServer(t)
	defer srv.Close()
	c := httpClient{client: srv.Client(), url: srv.URL, headers: HTTPSessionHeaders}
	if err := c.call(HTTPSessionCall, ""); err == nil {
		t.Fatal("a call without a session was answered: the server under test does not check")
	}
	id, err := c.open(HTTPSessionVersion)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if id != "s1" {
		t.Errorf("session id %q, want s1", id)
	}
	for range 3 {
		if err := c.call(HTTPSessionCall, id); err != nil {
			t.Fatalf("call in session %s: %v", id, err)
		}
	}
	// The version is checked: a server answering another is an error.
	if _, err := c.open("2024-11-05"); err == nil || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("open at a version the server does not answer: %v, want an initialize error", err)
	}
}

func TestShellQuote(t *testing.T) {
	got := shellQuote([]string{"/a b/raw", "it's", "$HOME"})
	out, err := exec.Command("sh", "-c", "printf '%s\\n' "+strings.TrimPrefix(got, "'/a b/raw' ")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "it's\n$HOME\n"; string(out) != want {
		t.Errorf("sh read %q back from %s, want %q", out, got, want)
	}
	if !strings.HasPrefix(got, "'/a b/raw' ") {
		t.Errorf("shellQuote = %s: the command is not one word", got)
	}
}

// A gateway's tree is counted whole and ended whole, even children in a
// process group of their own (as supergateway puts them).
func TestProcessTreeEnded(t *testing.T) {
	cmd := exec.Command("sh", "-c", "setsid sleep 60 & sleep 60 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var tree []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if tree = processTree(cmd.Process.Pid); len(tree) == 3 {
			break
		}
	}
	if len(tree) != 3 {
		endTree(cmd)
		t.Fatalf("tree %v, want the shell and its two sleeps", tree)
	}
	all, under, err := treeUsage(tree)
	if err != nil {
		t.Errorf("treeUsage: %v", err)
	}
	if under.Run > all.Run || all.Switches == 0 {
		t.Errorf("treeUsage: all %+v, under the root %+v", all, under)
	}
	endTree(cmd)
	for _, pid := range tree[1:] {
		for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && !exited(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("process %d outlived endTree", pid)
				break
			}
		}
	}
}
