package stdio_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// endpoints is one device under test: the transport's ends and the test's.
type endpoints struct {
	in         io.Reader // the transport reads requests here
	out        io.Writer // the transport writes frames here
	w          io.Writer // the test writes requests here
	r          io.Reader // the test reads frames here
	closeInput func()    // end of input, as the client sees it
	closeAll   func()    // the owner closes everything after Serve returns
}

// pipes gives the transport two real os.Pipe pairs, as a client's handed-over
// stdin and stdout.
func pipes(t *testing.T) endpoints {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return endpoints{
		in: inR, out: outW, w: inW, r: outR,
		closeInput: func() { inW.Close() },
		closeAll: func() {
			for _, f := range []*os.File{inR, inW, outR, outW} {
				f.Close()
			}
		},
	}
}

// socketPair gives the transport one end of a connected Unix stream socket,
// as an accepted session-socket connection.
func socketPair(t *testing.T) endpoints {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	server, client := conn(fds[0]), conn(fds[1])
	return endpoints{
		in: server, out: server, w: client, r: client,
		closeInput: func() { client.CloseWrite() },
		closeAll:   func() { server.Close(); client.Close() },
	}
}

var devices = []struct {
	name string
	open func(*testing.T) endpoints
}{
	{"pipe", pipes},
	{"socket", socketPair},
}

// onDevices runs a case on every device kind.
func onDevices(t *testing.T, f func(t *testing.T, open func(*testing.T) endpoints)) {
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) { f(t, d.open) })
	}
}

type harness struct {
	t      *testing.T
	ep     endpoints
	cat    *testCatalog
	out    chan string
	served chan error
	cancel context.CancelFunc
	exec   *executor.Executor

	inputClosed bool
	result      *error
}

type option func(*stdio.Transport, *executor.Limits)

func withLimit(n int) option {
	return func(tr *stdio.Transport, _ *executor.Limits) { tr.Limits.MaxLineBytes = n }
}

func withExecutor(concurrency, queue int) option {
	return func(_ *stdio.Transport, l *executor.Limits) {
		l.MaxConcurrency, l.MaxQueue = concurrency, queue
	}
}

func withRequestTimeout(d time.Duration) option {
	return func(_ *stdio.Transport, l *executor.Limits) { l.RequestTimeout = d }
}

func with(f func(*stdio.Transport)) option {
	return func(tr *stdio.Transport, _ *executor.Limits) { f(tr) }
}

// start serves a fresh connection on the device open makes. Everything is
// torn down and checked for leaked goroutines when the test ends.
func start(t *testing.T, open func(*testing.T) endpoints, opts ...option) *harness {
	t.Helper()
	ep := open(t)
	h := &harness{t: t, ep: ep, cat: newTestCatalog(), out: make(chan string, 10000), served: make(chan error, 1)}
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: h.cat}
	var limits executor.Limits
	for _, o := range opts {
		o(tr, &limits)
	}
	exec, err := executor.New(limits)
	if err != nil {
		t.Fatal(err)
	}
	h.exec = exec
	tr.Executor = exec
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(h.out)
		br := bufio.NewReaderSize(ep.r, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if line != "" {
					h.out <- "PARTIAL:" + line
				}
				return
			}
			h.out <- line[:len(line)-1]
		}
	}()
	go func() { h.served <- tr.Serve(ctx) }()
	t.Cleanup(func() {
		h.closeInput()
		h.cat.Release()
		h.wait()
		cancel()
		ep.closeAll()
		<-readerDone
		exec.Close()
		goleak.VerifyNone(t)
	})
	return h
}

func (h *harness) write(raw string) {
	h.t.Helper()
	if _, err := io.WriteString(h.ep.w, raw); err != nil {
		h.t.Fatalf("write input: %v", err)
	}
}

// send writes each line followed by a newline.
func (h *harness) send(lines ...string) {
	h.t.Helper()
	for _, l := range lines {
		h.write(l + "\n")
	}
}

func (h *harness) closeInput() {
	if !h.inputClosed {
		h.inputClosed = true
		h.ep.closeInput()
	}
}

// line returns the next output line, failing the test after 10 s.
func (h *harness) line() string {
	h.t.Helper()
	select {
	case l, ok := <-h.out:
		if !ok {
			h.t.Fatal("output ended, want a line")
		}
		return l
	case <-time.After(10 * time.Second):
		h.t.Fatal("no output line within 10s")
	}
	return ""
}

func (h *harness) expect(want string) {
	h.t.Helper()
	if got := h.line(); got != want {
		h.t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// noOutput checks that nothing is written within d (300 ms by the spec's
// convention).
func (h *harness) noOutput(d time.Duration) {
	h.t.Helper()
	select {
	case l, ok := <-h.out:
		if ok {
			h.t.Fatalf("unexpected output: %s", l)
		}
	case <-time.After(d):
	}
}

// wait returns what Serve returned, failing the test after 10 s.
func (h *harness) wait() error {
	h.t.Helper()
	if h.result != nil {
		return *h.result
	}
	select {
	case err := <-h.served:
		h.result = &err
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Serve did not return within 10s")
	}
	return nil
}

// finish closes the input and checks Serve returns ok and nothing more is
// written.
func (h *harness) finish() {
	h.t.Helper()
	h.closeInput()
	if err := h.wait(); err != nil {
		h.t.Fatalf("Serve returned %v, want nil", err)
	}
	h.ep.closeAll()
	for l := range h.out {
		h.t.Fatalf("unexpected output after the end: %s", l)
	}
}

const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// req is REQ(id, m, p) of docs/transport.md §16: a 2026-era request.
func req(id any, method, params string) string {
	var p map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		panic(err)
	}
	if _, ok := p["_meta"]; !ok {
		p["_meta"] = json.RawMessage(meta)
	}
	return lreq(id, method, p)
}

// lreq is LREQ(id, m, p): a legacy request, no _meta added.
func lreq(id any, method string, params any) string {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// call is a 2026-era tools/call of tool with args (JSON text).
func call(id any, tool, args string) string {
	return req(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, args))
}

func callWithToken(id any, tool, args, token string) string {
	m := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":` + token + `}`
	return req(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s,"_meta":%s}`, tool, args, m))
}

func initReq(v string) string {
	return `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
}

func cancelReq(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`
}

// frame is a decoded output line.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func parse(t *testing.T, line string) frame {
	t.Helper()
	var f frame
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		t.Fatalf("output line is not JSON: %v: %q", err, line)
	}
	return f
}

// errLine is the exact error line of docs/transport.md §6.
func errLine(id string, code int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, msg)
}

func resultText(t *testing.T, line string) string {
	t.Helper()
	f := parse(t, line)
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if f.Result == nil || json.Unmarshal(f.Result, &r) != nil || len(r.Content) != 1 {
		t.Fatalf("not a text result: %s", line)
	}
	return r.Content[0].Text
}

func mustUnmarshal(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("unmarshal %s: %v", raw, err)
	}
}

func goleakCheck(t *testing.T) {
	t.Helper()
	goleak.VerifyNone(t)
}

func idOf(v any) protocol.ID {
	switch v := v.(type) {
	case string:
		return protocol.StringID(v)
	case int:
		return protocol.IntID(int64(v))
	}
	panic("bad id")
}

// lineSource reads output lines for tests that drive Serve by hand.
type lineSource struct{ ch chan string }

func newLineSource(r io.Reader) *lineSource {
	s := &lineSource{ch: make(chan string, 100)}
	go func() {
		defer close(s.ch)
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			s.ch <- l[:len(l)-1]
		}
	}()
	return s
}

func (s *lineSource) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-s.ch:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no line within 10s")
	}
	return ""
}
