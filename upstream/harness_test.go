package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	snodcatalog "github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// The harness of the Manager's tests: a configuration whose entries run
// the fake upstream (FAKE in the TOML is its path), a Manager serving it,
// the aggregated view on a server of its own, and clients that are real
// stdio transports over pipes, speaking NDJSON as an MCP client does.

type harness struct {
	t        *testing.T
	m        *Manager
	agg      *server.Server
	exec     *executor.Executor
	stateDir string
	cancel   context.CancelFunc
	served   chan struct{}
	logs     *logBuffer
	nextID   uint64

	viewMu sync.Mutex
	views  map[string]*server.Server // pass-through views, made at first use
}

// view is the server of view: the aggregated one (""), or the upstream
// passed through, built as the daemon builds it and attached until the
// test ends.
func (h *harness) view(tb testing.TB, name string) (*server.Server, error) {
	if name == "" {
		return h.agg, nil
	}
	h.viewMu.Lock()
	defer h.viewMu.Unlock()
	if srv, ok := h.views[name]; ok {
		return srv, nil
	}
	if NamedView(name) { // a [views.NAME] view of the first configuration
		v := h.m.cfg.View(name[1:])
		if v == nil {
			tb.Fatalf("no view %s", name)
		}
		srv, err := snodcatalog.ViewServer(h.m.cfg, "snodod"+name, slog.New(slog.DiscardHandler))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(h.m.AttachNamed(srv, v))
		if h.views == nil {
			h.views = map[string]*server.Server{}
		}
		h.views[name] = srv
		return srv, nil
	}
	srv, err := snodcatalog.ViewServer(h.m.cfg, name, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.m.Has(name); err != nil {
		return nil, err
	}
	tb.Cleanup(h.m.AttachView(srv, name))
	if h.views == nil {
		h.views = map[string]*server.Server{}
	}
	h.views[name] = srv
	return srv, nil
}

// open opens a session of view for a client working in cwd, as the
// daemon does: its state, carrying its caller, and its dispatcher; the
// session's release is registered with tb.
func (h *harness) open(tb testing.TB, id uint64, view, cwd string) (*server.SessionState, *server.Server, *Client, func(), error) {
	caller := &server.Caller{Session: id, Cwd: cwd, View: view}
	release, err := h.m.Open(caller)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	srv, err := h.view(tb, view)
	if err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	h.m.Warm(caller)
	ss := server.NewSessionState(0)
	ss.SetCaller(caller)
	return ss, srv, h.m.clientOf(caller), release, nil
}

// loadConfig loads toml (FAKE replaced by the fake's path).
func loadConfig(t *testing.T, toml string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(toml, "FAKE", fakePath)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + t.TempDir(), "XDG_RUNTIME_DIR=/run/test"}})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// newBenchHarness is newHarness for a benchmark: oneFake, its log dropped.
func newBenchHarness(b *testing.B) *harness {
	b.Helper()
	path := filepath.Join(b.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(oneFake, "FAKE", fakePath)), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{logs: &logBuffer{}, served: make(chan struct{})}
	if h.m, err = New(cfg, Options{Env: []string{"PATH=/usr/bin:/bin"}, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	}
	if h.agg, err = server.New(server.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	}
	h.m.Attach(h.agg, "")
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.served)
		_ = h.m.Serve(ctx)
	}()
	b.Cleanup(func() {
		cancel()
		<-h.served
	})
	return h
}

// newHarness serves toml's upstreams; stateDir "" gives a fresh one.
func newHarness(t *testing.T, toml string, stateDir ...string) *harness {
	t.Helper()
	proctest.Cleanup(t) // registered first: runs after the manager stopped
	h := &harness{t: t, logs: &logBuffer{}, served: make(chan struct{})}
	h.stateDir = t.TempDir()
	if len(stateDir) > 0 {
		h.stateDir = stateDir[0]
	}
	cfg := loadConfig(t, toml)
	var err error
	h.m, err = New(cfg, Options{StateDir: h.stateDir, Home: t.TempDir(), Cwd: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Version: "test", ShutdownGrace: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(h.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.agg, err = server.New(server.Options{Info: protocol.Implementation{Name: "snodod", Version: "test"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.m.Attach(h.agg, "snodod's own"))
	if h.exec, err = executor.New(executor.Limits{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.served)
		_ = h.m.Serve(ctx)
	}()
	t.Cleanup(h.stop)
	return h
}

// stop stops the manager and waits for it.
func (h *harness) stop() {
	h.cancel()
	select {
	case <-h.served:
	case <-time.After(30 * time.Second):
		h.t.Error("the manager did not stop")
	}
}

// row returns the status row of name's instance label ("" for the first).
func (h *harness) row(name, instance string) Status {
	for _, r := range h.m.Status() {
		if r.Name == name && (instance == "" || r.Instance == instance) {
			return r
		}
	}
	h.t.Fatalf("no status row for %s %s in %+v", name, instance, h.m.Status())
	return Status{}
}

// client is one session over real pipes.
type client struct {
	t       *testing.T
	h       *harness
	in      *os.File // the client's writing end
	out     *os.File // its reading end
	cl      *Client  // the session as the manager sees it
	release func()   // Open's
	done    chan struct{}

	mu       sync.Mutex
	nextID   int
	pending  map[string]chan map[string]json.RawMessage
	notes    []map[string]json.RawMessage
	noted    chan struct{}
	answer   func(method string, params json.RawMessage) (any, *protocol.Error)
	requests []string
	silent   bool // requests from snodod are recorded, never answered
}

// connect starts a session on view, working in cwd; legacy initializes it
// at version ("" leaves it uninitialized, for 2026 requests).
func (h *harness) connect(view, cwd, version string) *client {
	t := h.t
	t.Helper()
	h.nextID++
	ss, srv, cl, release, err := h.open(t, h.nextID, view, cwd)
	if err != nil {
		t.Fatalf("open(%q): %v", view, err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, h: h, in: inW, out: outR, cl: cl, release: release, done: make(chan struct{}),
		pending: map[string]chan map[string]json.RawMessage{}, noted: make(chan struct{}, 1)}
	tr := &stdio.Transport{In: inR, Out: outW, Dispatcher: srv, State: ss, Executor: h.exec, Logger: slog.New(slog.DiscardHandler)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = tr.Serve(context.Background())
		outW.Close()
		inR.Close()
	}()
	go func() {
		defer close(c.done)
		c.read(outR)
	}()
	t.Cleanup(func() {
		c.in.Close()
		<-served
		<-c.done
		outR.Close()
		release()
	})
	if version != "" {
		res := c.call("initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"test","version":"1"}}`, version))
		if res["error"] != nil {
			t.Fatalf("initialize: %s", res["error"])
		}
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	return c
}

// onRequest sets how the client answers requests from snodod.
func (c *client) onRequest(f func(method string, params json.RawMessage) (any, *protocol.Error)) {
	c.mu.Lock()
	c.answer = f
	c.mu.Unlock()
}

// neverAnswer makes the client record snodod's requests and never answer
// them, as a client that declared sampling and elicitation and hangs.
func (c *client) neverAnswer() {
	c.mu.Lock()
	c.silent = true
	c.mu.Unlock()
}

// asked is how many requests snodod sent the client.
func (c *client) asked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// gone closes both of the client's ends, as a client that exits does.
func (c *client) gone() {
	c.in.Close()
	c.out.Close()
}

func (c *client) send(line string) {
	if _, err := c.in.WriteString(line + "\n"); err != nil {
		c.t.Errorf("write: %v", err)
	}
}

func (c *client) read(r *os.File) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			c.t.Errorf("not JSON from snodod: %s", sc.Bytes())
			continue
		}
		id, hasID := m["id"]
		_, hasMethod := m["method"]
		switch {
		case hasMethod && hasID:
			c.mu.Lock()
			silent := c.silent
			if silent {
				var method string
				_ = json.Unmarshal(m["method"], &method)
				c.requests = append(c.requests, method)
			}
			c.mu.Unlock()
			if !silent {
				go c.serve(m)
			}
		case hasMethod:
			c.mu.Lock()
			c.notes = append(c.notes, m)
			c.mu.Unlock()
			select {
			case c.noted <- struct{}{}:
			default:
			}
		default:
			c.mu.Lock()
			ch := c.pending[string(id)]
			delete(c.pending, string(id))
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
}

// serve answers a request from snodod with c.answer.
func (c *client) serve(m map[string]json.RawMessage) {
	var method string
	_ = json.Unmarshal(m["method"], &method)
	c.mu.Lock()
	c.requests = append(c.requests, method)
	answer := c.answer
	c.mu.Unlock()
	if answer == nil {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m["id"]))
		return
	}
	res, perr := answer(method, m["params"])
	if perr != nil {
		c.send(string(protocol.AppendError(nil, mustID(m["id"]), perr)))
		return
	}
	b, _ := json.Marshal(res)
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m["id"], b))
}

func mustID(raw json.RawMessage) protocol.ID {
	id, _ := protocol.ParseID(raw)
	return id
}

// start sends a request and returns the channel of its response.
func (c *client) start(id, method, params string) chan map[string]json.RawMessage {
	ch := make(chan map[string]json.RawMessage, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if params == "" {
		params = "{}"
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
	return ch
}

// call sends a request with a fresh id and waits for its response.
func (c *client) call(method, params string) map[string]json.RawMessage {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprint(c.nextID)
	c.mu.Unlock()
	return c.wait(c.start(id, method, params))
}

func (c *client) wait(ch chan map[string]json.RawMessage) map[string]json.RawMessage {
	c.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(60 * time.Second):
		c.t.Fatal("no response within 60 s")
		return nil
	}
}

// modern wraps params members for a 2026 request.
func modern(members string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{}}}`
	if members == "" {
		return "{" + meta + "}"
	}
	return "{" + meta + "," + members + "}"
}

// notifications returns the notifications received so far with method.
func (c *client) notifications(method string) []map[string]json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]json.RawMessage
	for _, n := range c.notes {
		var m string
		_ = json.Unmarshal(n["method"], &m)
		if m == method {
			out = append(out, n)
		}
	}
	return out
}

// result decodes a response's result, failing on an error response.
func result(t *testing.T, res map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	if res["error"] != nil {
		t.Fatalf("error response: %s", res["error"])
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res["result"], &m); err != nil {
		t.Fatalf("result %s: %v", res["result"], err)
	}
	return m
}

// names lists the names (or uris) of a list result's items.
func names(t *testing.T, res map[string]json.RawMessage, list, member string) []string {
	t.Helper()
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(result(t, res)[list], &items); err != nil {
		t.Fatalf("%s: %v", list, err)
	}
	var out []string
	for _, it := range items {
		var s string
		_ = json.Unmarshal(it[member], &s)
		out = append(out, s)
	}
	return out
}

// text is the first text block of a tools/call result.
func text(t *testing.T, res map[string]json.RawMessage) string {
	t.Helper()
	var content []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(result(t, res)["content"], &content)
	if len(content) == 0 {
		return ""
	}
	return content[0].Text
}

// structured is a tools/call result's structuredContent.
func structured(t *testing.T, res map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result(t, res)["structuredContent"], &m); err != nil {
		t.Fatalf("structuredContent of %s: %v", res["result"], err)
	}
	return m
}

// isError reports a tools/call result's isError.
func isError(t *testing.T, res map[string]json.RawMessage) bool {
	t.Helper()
	return string(result(t, res)["isError"]) == "true"
}

// errorOf decodes an error response.
func errorOf(t *testing.T, res map[string]json.RawMessage) (code int64, message string, data json.RawMessage) {
	t.Helper()
	var e struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if res["error"] == nil || json.Unmarshal(res["error"], &e) != nil {
		t.Fatalf("not an error response: %v", res)
	}
	return e.Code, e.Message, e.Data
}

// fakeTool is the params of a tools/call.
func fakeTool(name, args string) string {
	if args == "" {
		args = "{}"
	}
	return fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args)
}
