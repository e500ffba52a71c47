package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/mcpclient/oauth"
)

// The versions this client speaks: 2026-07-28 (stateless, per-request
// _meta) when the server answers server/discover with it, else the
// 2025-11-25 initialize handshake.
const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
)

// mcpClient is just enough of a Streamable HTTP MCP client for the
// conformance suite's client scenarios: the era probe, requests answered
// with JSON or SSE (server requests on the stream answered, a closed
// stream resumed with GET and Last-Event-ID after the server's retry),
// 2026's headers and multi-round-trip results. Its HTTP client carries the
// OAuth transport. It is not snodod's client: that replaces it.
type mcpClient struct {
	url     string
	http    *http.Client
	caps    map[string]any // the client capabilities it declares
	handle  func(method string, params json.RawMessage) (any, error)
	modern  bool                   // 2026-07-28
	version string                 // the protocol version in use
	session string                 // Mcp-Session-Id (legacy)
	tools   map[string]paramHeader // the Mcp-Param headers of each valid tool
	nextID  atomic.Int64

	mu      sync.Mutex
	pending map[string]chan message // the requests waiting, by id
	stop    context.CancelFunc      // ends the GET stream
	wg      sync.WaitGroup
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// connect probes the era: server/discover at 2026-07-28 (once more after
// -32022 naming it supported), else the initialize handshake. An
// authorization failure ends it: it is not an era question.
func (c *mcpClient) connect(ctx context.Context) error {
	c.modern, c.version = true, modernVersion
	for attempt := 0; attempt < 2; attempt++ {
		res, err := c.request(ctx, "server/discover", map[string]any{})
		if err == nil {
			var d struct {
				SupportedVersions []string `json:"supportedVersions"`
			}
			if json.Unmarshal(res, &d) == nil && slices.Contains(d.SupportedVersions, modernVersion) {
				return nil
			}
			break
		}
		var re *rpcError
		if errors.As(err, &re) && re.Code == -32022 {
			var data struct {
				Supported []string `json:"supported"`
			}
			if json.Unmarshal(re.Data, &data) == nil && slices.Contains(data.Supported, modernVersion) {
				continue
			}
			break
		}
		if isAuthError(err) {
			return err
		}
		break
	}
	c.modern, c.version = false, legacyVersion
	res, err := c.request(ctx, "initialize", map[string]any{
		"protocolVersion": legacyVersion,
		"capabilities":    c.caps,
		"clientInfo":      map[string]any{"name": "snodod-conformance-client", "version": "1.0.0"},
	})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	switch init.ProtocolVersion {
	case "2025-11-25", "2025-06-18", "2025-03-26":
		c.version = init.ProtocolVersion
	default:
		return fmt.Errorf("the server chose protocol version %q", init.ProtocolVersion)
	}
	if err := c.notify(ctx, "notifications/initialized", nil); err != nil {
		return err
	}
	c.listen()
	return nil
}

// listen opens the session's GET stream, on which a 2025 server sends
// the requests and notifications that belong to no request of the
// client's (an elicitation, in the TypeScript SDK), and returns once the
// server answered it; without one (405, 404) there is nothing to listen
// to.
func (c *mcpClient) listen() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return
	}
	c.headers(req, "")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return
	}
	c.wg.Go(func() {
		defer resp.Body.Close()
		var lastID string
		retry := time.Second
		_, _, _ = c.readEvents(ctx, resp.Body, "", &lastID, &retry)
	})
}

// close ends a legacy session and its GET stream.
func (c *mcpClient) close() {
	if c.stop != nil {
		c.stop()
		c.wg.Wait()
	}
	if c.session == "" {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	c.headers(req, "")
	if resp, err := c.http.Do(req); err == nil {
		resp.Body.Close()
	}
}

// call sends a request and, in 2026, follows input_required results
// (SEP-2322): each input request answered, the request sent again with a
// new id, its inputResponses and the requestState it was given, exactly.
func (c *mcpClient) call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	for round := 0; round < 8; round++ {
		res, err := c.request(ctx, method, params)
		if err != nil || !c.modern {
			return res, err
		}
		var ir struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  *string                    `json:"requestState"`
		}
		if json.Unmarshal(res, &ir) != nil || ir.ResultType != "input_required" {
			return res, nil // an absent resultType is "complete"
		}
		responses := map[string]any{}
		for key, raw := range ir.InputRequests {
			var in message
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("input request %q: %w", key, err)
			}
			out, err := c.handle(in.Method, in.Params)
			if err != nil {
				return nil, fmt.Errorf("input request %q (%s): %w", key, in.Method, err)
			}
			responses[key] = out
		}
		next := map[string]any{}
		for k, v := range params {
			next[k] = v
		}
		next["inputResponses"] = responses
		delete(next, "requestState")
		if ir.RequestState != nil {
			next["requestState"] = *ir.RequestState
		}
		params = next
	}
	return nil, errors.New("more than 8 rounds of input requests")
}

// request sends one JSON-RPC request and waits for its answer, in a JSON
// body or on an SSE stream.
func (c *mcpClient) request(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	key := strconv.FormatInt(id, 10)
	answer := make(chan message, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.pending = map[string]chan message{}
	}
	c.pending[key] = answer
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, key)
		c.mu.Unlock()
	}()
	if params == nil {
		params = map[string]any{}
	}
	if c.modern {
		params = c.withMeta(params)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.headers(req, method)
	if c.modern {
		c.modernHeaders(req, method, params)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && method == "initialize" {
		c.session = s
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var m message
		if json.Unmarshal(data, &m) == nil && m.Error != nil {
			return nil, m.Error
		}
		return nil, fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	if strings.HasPrefix(ct, "text/event-stream") {
		return c.readStream(ctx, resp.Body, key, answer)
	}
	var m message
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: the answer is not JSON-RPC: %w", method, err)
	}
	if m.Error != nil {
		return nil, m.Error
	}
	return m.Result, nil
}

// notify posts a notification.
func (c *mcpClient) notify(ctx context.Context, method string, params map[string]any) error {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	body, _ := json.Marshal(msg)
	return c.post(ctx, method, body)
}

// post posts a notification or a response, which the server acknowledges.
func (c *mcpClient) post(ctx context.Context, method string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	c.headers(req, method)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("posting %s: HTTP %d", method, resp.StatusCode)
	}
	return nil
}

// headers are those of every request.
func (c *mcpClient) headers(req *http.Request, method string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method != "initialize" {
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
}

// withMeta adds 2026's per-request _meta.
func (c *mcpClient) withMeta(params map[string]any) map[string]any {
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientCapabilities": c.caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "snodod-conformance-client", "version": "1.0.0"},
	}
	return p
}

// tool is a tools/list entry, its schema kept as the server wrote it.
type tool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// listTools lists the tools, leaving out (with a warning) those whose
// x-mcp-header annotations are invalid, as 2026 clients must.
func (c *mcpClient) listTools(ctx context.Context) ([]tool, error) {
	res, err := c.call(ctx, "tools/list", nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Tools []tool `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return nil, err
	}
	c.tools = map[string]paramHeader{}
	var kept []tool
	for _, t := range list.Tools {
		h, err := paramHeaders(t.InputSchema)
		if err != nil {
			log.Printf("warning: tool %q left out: %v", t.Name, err)
			continue
		}
		c.tools[t.Name] = h
		kept = append(kept, t)
	}
	return kept, nil
}

// list calls a list method and returns its items under key.
func (c *mcpClient) list(ctx context.Context, method, key string) ([]map[string]any, error) {
	res, err := c.call(ctx, method, nil)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, err
	}
	var items []map[string]any
	err = json.Unmarshal(m[key], &items)
	return items, err
}

// isAuthError reports whether err is an authorization failure (the OAuth
// transport's).
func isAuthError(err error) bool {
	var oe *oauth.Error
	return errors.As(err, &oe)
}
