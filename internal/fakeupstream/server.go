package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
)

const version2026 = "2026-07-28"

// server is the fake's state: one per process.
type server struct {
	o options

	out sync.Mutex // one writer of stdout
	w   *bufio.Writer

	mu        sync.Mutex
	seen      map[string]bool               // every request id, by its JSON text
	inflight  map[string]context.CancelFunc // requests being served
	history   []map[string]any
	cancelled []json.RawMessage
	waiting   map[string]chan message // our requests to the client, by id
	nextID    int

	floods floodCounts // flood.go
}

// message is any JSON-RPC message, as received.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error to answer.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func newServer(o options) *server {
	return &server{
		o:        o,
		w:        bufio.NewWriter(os.Stdout),
		seen:     map[string]bool{},
		inflight: map[string]context.CancelFunc{},
		waiting:  map[string]chan message{},
	}
}

// serve reads requests until stdin ends, serving each on its own
// goroutine. At the end of input it returns at once, as most servers do:
// requests still running are abandoned.
func (s *server) serve(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			s.writeError(json.RawMessage("null"), rpcError{Code: -32700, Message: "Parse error"})
			continue
		}
		switch {
		case m.Method == "" && m.ID != nil:
			if s.floodAnswer(m) {
				continue
			}
			s.mu.Lock()
			ch := s.waiting[string(m.ID)]
			delete(s.waiting, string(m.ID))
			s.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case m.ID == nil:
			s.notification(m)
		default:
			s.request(m)
		}
	}
}

func (s *server) notification(m message) {
	if m.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	s.mu.Lock()
	s.cancelled = append(s.cancelled, m.Params)
	cancel := s.inflight[string(p.RequestID)]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *server) request(m message) {
	key := string(m.ID)
	s.mu.Lock()
	if s.seen[key] && !s.o.noStrictIDs {
		s.mu.Unlock()
		s.writeError(m.ID, rpcError{Code: -32600, Message: "id reused: " + key})
		return
	}
	s.seen[key] = true
	var tool string
	if m.Method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		tool = p.Name
	}
	s.history = append(s.history, map[string]any{"id": m.ID, "method": m.Method, "tool": tool})
	ctx, cancel := context.WithCancel(context.Background())
	s.inflight[key] = cancel
	s.mu.Unlock()
	go func() {
		defer cancel()
		result, rerr, answer := s.handle(ctx, m)
		s.mu.Lock()
		delete(s.inflight, key)
		s.mu.Unlock()
		if !answer {
			return
		}
		if rerr != nil {
			s.writeError(m.ID, *rerr)
			return
		}
		s.writeResult(m.ID, result)
	}()
}

// handle serves one request. answer false means no response at all.
func (s *server) handle(ctx context.Context, m message) (result any, rerr *rpcError, answer bool) {
	params := map[string]json.RawMessage{}
	_ = json.Unmarshal(m.Params, &params)
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(params["_meta"], &meta)
	_, modernRequest := meta["io.modelcontextprotocol/protocolVersion"]

	switch m.Method {
	case "ping":
		return s.ping() // pings.go
	case "server/discover":
		return s.discover(meta)
	case "initialize":
		return s.initialize(params)
	}
	if s.o.era == "2026" || (s.o.era == "both" && modernRequest) {
		if e := check2026(meta); e != nil {
			return nil, e, true
		}
	}
	res, e, answer := s.method(ctx, m, params, meta)
	if e == nil && answer && modernRequest {
		if r, ok := res.(map[string]any); ok {
			if _, set := r["resultType"]; !set {
				r["resultType"] = "complete"
			}
			r["_meta"] = map[string]any{"io.modelcontextprotocol/serverInfo": s.serverInfo()}
		}
	}
	return res, e, answer
}

// check2026 applies the 2026 per-request metadata rules the fake needs.
func check2026(meta map[string]json.RawMessage) *rpcError {
	raw, ok := meta["io.modelcontextprotocol/protocolVersion"]
	if !ok {
		return &rpcError{Code: -32602, Message: "Missing required io.modelcontextprotocol/protocolVersion metadata"}
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return &rpcError{Code: -32602, Message: "io.modelcontextprotocol/protocolVersion must be a string"}
	}
	if v != version2026 {
		return &rpcError{Code: -32022, Message: "Unsupported protocol version", Data: map[string]any{"requested": v, "supported": []string{version2026}}}
	}
	caps, ok := meta["io.modelcontextprotocol/clientCapabilities"]
	if !ok || len(caps) == 0 || caps[0] != '{' {
		return &rpcError{Code: -32602, Message: "Missing required client capabilities metadata"}
	}
	return nil
}

func (s *server) serverInfo() map[string]any {
	return map[string]any{"name": s.o.name, "version": s.o.version}
}

func (s *server) capabilities() map[string]any {
	lc := s.o.listChanged
	return map[string]any{
		"tools":     map[string]any{"listChanged": lc},
		"prompts":   map[string]any{"listChanged": lc},
		"resources": map[string]any{"listChanged": lc, "subscribe": true},
		"logging":   map[string]any{},
	}
}

func (s *server) discover(meta map[string]json.RawMessage) (any, *rpcError, bool) {
	if s.o.probeStderr > 0 {
		writeStderr(s.o.probeStderr)
	}
	sleep(s.o.discoverDelay)
	if s.o.era == "legacy" {
		if s.o.discoverError == 0 {
			return nil, nil, false
		}
		return nil, &rpcError{Code: s.o.discoverError, Message: "Method not found"}, true
	}
	if e := check2026(meta); e != nil {
		return nil, e, true
	}
	if s.o.refuseDiscover {
		s.o.refuseDiscover = false
		return nil, &rpcError{Code: -32022, Message: "Unsupported protocol version", Data: map[string]any{"supported": []string{version2026}}}, true
	}
	versions := []string{version2026}
	if s.o.era == "both" {
		versions = append(versions, s.o.versions...)
	}
	r := map[string]any{
		"resultType":        "complete",
		"supportedVersions": versions,
		"capabilities":      s.capabilities(),
		"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": s.serverInfo()},
	}
	if s.o.instructions != "" {
		r["instructions"] = s.o.instructions
	}
	return r, nil, true
}

func (s *server) initialize(params map[string]json.RawMessage) (any, *rpcError, bool) {
	sleep(s.o.initDelay)
	if s.o.era == "2026" {
		return nil, &rpcError{Code: -32600, Message: "No configured protocol dialect recognized the request", Data: map[string]any{"supported": []string{version2026}}}, true
	}
	var proposed string
	_ = json.Unmarshal(params["protocolVersion"], &proposed)
	v := s.o.versions[0]
	if slices.Contains(s.o.versions, proposed) {
		v = proposed
	}
	r := map[string]any{
		"protocolVersion": v,
		"capabilities":    s.capabilities(),
		"serverInfo":      s.serverInfo(),
	}
	if s.o.instructions != "" {
		r["instructions"] = s.o.instructions
	}
	return r, nil, true
}

// ask sends a request to the client and waits for its response.
func (s *server) ask(ctx context.Context, method string, params any) (message, bool) {
	s.mu.Lock()
	s.nextID++
	id := json.RawMessage(strconv.Quote("fake-" + strconv.Itoa(s.nextID)))
	ch := make(chan message, 1)
	s.waiting[string(id)] = ch
	s.mu.Unlock()
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	s.write(m)
	select {
	case m := <-ch:
		return m, true
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waiting, string(id))
		s.mu.Unlock()
		s.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "the call was cancelled"})
		return message{}, false
	}
}

func (s *server) notify(method string, params any) {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	s.write(m)
}

func (s *server) writeResult(id json.RawMessage, result any) {
	r, err := json.Marshal(result)
	if err != nil {
		s.writeError(id, rpcError{Code: -32603, Message: err.Error()})
		return
	}
	if s.o.idLast {
		s.writeLine(fmt.Appendf(nil, `{"result":%s,"jsonrpc":"2.0","id":%s}`, r, id))
		return
	}
	s.writeLine(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, r))
}

func (s *server) writeError(id json.RawMessage, e rpcError) {
	b, _ := json.Marshal(e)
	if s.o.idLast {
		s.writeLine(fmt.Appendf(nil, `{"error":%s,"jsonrpc":"2.0","id":%s}`, b, id))
		return
	}
	s.writeLine(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id, b))
}

func (s *server) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "marshal:", err)
		return
	}
	s.writeLine(b)
}

// writeLine writes one line to stdout at once.
func (s *server) writeLine(b []byte) {
	s.out.Lock()
	defer s.out.Unlock()
	_, _ = s.w.Write(b)
	_ = s.w.WriteByte('\n')
	_ = s.w.Flush()
}
