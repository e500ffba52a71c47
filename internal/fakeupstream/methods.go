package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// behaviourTools are always listed, in this order, before -tools fillers.
// behaviourTools are listed first; fakebuild.BehaviourTools counts them.
var behaviourTools = []string{"echo", "slow", "progress", "crash", "never", "big", "stderr", "junk", "sample", "elicit", "roots", "ping-client", "notify", "history", "flood"}

func (s *server) method(ctx context.Context, m message, params, meta map[string]json.RawMessage) (any, *rpcError, bool) {
	switch m.Method {
	case "tools/list":
		return s.page(params, "tools", s.toolItems())
	case "prompts/list":
		return s.page(params, "prompts", s.items(s.o.prompts, func(i int) any {
			return map[string]any{"name": fmt.Sprintf("prompt-%03d", i), "description": "a fake prompt"}
		}))
	case "resources/list":
		return s.page(params, "resources", s.items(s.o.resources, func(i int) any {
			return map[string]any{"uri": fmt.Sprintf("fake://res/%03d", i), "name": fmt.Sprintf("res-%03d", i)}
		}))
	case "resources/templates/list":
		return s.page(params, "resourceTemplates", s.items(s.o.templates, func(i int) any {
			return map[string]any{"uriTemplate": fmt.Sprintf("fake://tpl/%03d/{x}", i), "name": fmt.Sprintf("tpl-%03d", i)}
		}))
	case "resources/read":
		var uri string
		_ = json.Unmarshal(params["uri"], &uri)
		return map[string]any{"contents": []any{map[string]any{"uri": uri, "mimeType": "text/plain", "text": "contents of " + uri}}}, nil, true
	case "prompts/get":
		var name string
		_ = json.Unmarshal(params["name"], &name)
		return map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "prompt " + name}}}}, nil, true
	case "resources/subscribe", "resources/unsubscribe", "logging/setLevel":
		return map[string]any{}, nil, true
	case "completion/complete":
		return map[string]any{"completion": map[string]any{"values": []string{}}}, nil, true
	case "tools/call":
		return s.tool(ctx, m, params, meta)
	}
	return nil, &rpcError{Code: -32601, Message: "Method not found: " + m.Method}, true
}

func (s *server) items(n int, item func(i int) any) []any {
	out := make([]any, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, item(i))
	}
	return out
}

func (s *server) toolItems() []any {
	schema := map[string]any{"type": "object"}
	var out []any
	for _, name := range behaviourTools {
		out = append(out, map[string]any{"name": name, "description": "fake " + name, "inputSchema": schema})
	}
	for i := 1; i <= s.o.tools; i++ {
		out = append(out, map[string]any{"name": fmt.Sprintf("tool-%03d", i), "inputSchema": schema})
	}
	for _, t := range fileTools() {
		out = append(out, t)
	}
	return out
}

// page answers one page of a list; the cursor is the index of its first
// item.
func (s *server) page(params map[string]json.RawMessage, key string, all []any) (any, *rpcError, bool) {
	start := 0
	if raw, ok := params["cursor"]; ok {
		var c string
		_ = json.Unmarshal(raw, &c)
		if c == "again" {
			c = strconv.Itoa(s.o.pageSize)
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > len(all) {
			return nil, &rpcError{Code: -32602, Message: "Invalid cursor"}, true
		}
		start = n
	}
	end := len(all)
	if s.o.pageSize > 0 {
		end = min(len(all), start+s.o.pageSize)
	}
	r := map[string]any{key: all[start:end]}
	if end < len(all) {
		r["nextCursor"] = strconv.Itoa(end)
		if s.o.repeatCursor {
			r["nextCursor"] = "again"
		}
	}
	return r, nil, true
}

// args are a tools/call's arguments, read leniently.
type args map[string]json.RawMessage

func (a args) int(k string, def int) int {
	var n int
	if json.Unmarshal(a[k], &n) != nil {
		return def
	}
	return n
}

func (a args) bool(k string) bool {
	var b bool
	_ = json.Unmarshal(a[k], &b)
	return b
}

func (a args) str(k string) string {
	var s string
	_ = json.Unmarshal(a[k], &s)
	return s
}

func text(t string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": t}}, "isError": false}
}

func structured(v map[string]any) map[string]any {
	b, _ := json.Marshal(v)
	r := text(string(b))
	r["structuredContent"] = v
	return r
}

func (s *server) tool(ctx context.Context, m message, params, meta map[string]json.RawMessage) (any, *rpcError, bool) {
	var name string
	_ = json.Unmarshal(params["name"], &name)
	a := args{}
	_ = json.Unmarshal(params["arguments"], &a)
	echo := func() map[string]any {
		return structured(map[string]any{"id": m.ID, "meta": params["_meta"], "arguments": params["arguments"]})
	}
	switch name {
	case "echo":
		return echo(), nil, true
	case "slow":
		if tok := meta["progressToken"]; tok != nil && a.bool("announce") {
			s.notify("notifications/progress", map[string]any{"progressToken": tok, "progress": 0})
		}
		select {
		case <-time.After(time.Duration(a.int("ms", 1000)) * time.Millisecond):
		case <-ctx.Done():
			if !a.bool("ignoreCancel") {
				return nil, nil, false
			}
			time.Sleep(time.Duration(a.int("ms", 1000)) * time.Millisecond)
		}
		return echo(), nil, true
	case "progress":
		steps, ms := a.int("steps", 3), a.int("ms", 0)
		tok := meta["progressToken"]
		for i := 1; i <= steps && tok != nil; i++ {
			for range 1 + boolInt(a.bool("repeat")) {
				s.notify("notifications/progress", map[string]any{"progressToken": tok, "progress": i, "total": steps, "message": fmt.Sprintf("step %d", i)})
			}
			sleep(time.Duration(ms) * time.Millisecond)
		}
		return echo(), nil, true
	case "crash":
		if t := a.str("stderr"); t != "" {
			fmt.Fprintln(os.Stderr, t)
		}
		os.Exit(a.int("code", 3))
	case "never":
		<-ctx.Done()
		return nil, nil, false
	case "big":
		return text(strings.Repeat("b", a.int("bytes", 1<<20))), nil, true
	case "stderr":
		writeStderr(a.int("bytes", 1<<20))
		return text("wrote stderr"), nil, true
	case "junk":
		s.writeLine([]byte(a.str("text")))
		return text("wrote junk"), nil, true
	case "elicit":
		if *urlElicitation {
			return s.urlElicit() // urlelicit.go
		}
		return s.askClient(ctx, name, params, meta)
	case "sample", "roots":
		return s.askClient(ctx, name, params, meta)
	case "ping-client":
		r, ok := s.ask(ctx, "ping", nil)
		if !ok {
			return nil, nil, false
		}
		return structured(map[string]any{"response": r.Result, "error": r.Error}), nil, true
	case "flood":
		res, answer := s.flood(ctx, a) // flood.go
		return res, nil, answer
	case "notify":
		var p any
		_ = json.Unmarshal(a["params"], &p)
		s.notify(a.str("method"), p)
		return text("notified"), nil, true
	case "history":
		s.mu.Lock()
		h := map[string]any{"requests": s.history, "cancelled": s.cancelled}
		b, _ := json.Marshal(h)
		s.mu.Unlock()
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return structured(v), nil, true
	}
	for i := 1; i <= s.o.tools; i++ {
		if name == fmt.Sprintf("tool-%03d", i) {
			return text(name), nil, true
		}
	}
	if fileTool(name) {
		return echo(), nil, true
	}
	return nil, &rpcError{Code: -32602, Message: "Unknown tool: " + name}, true
}

// clientRequests are what sample, elicit and roots ask the client.
var clientRequests = map[string]struct {
	method string
	params map[string]any
}{
	"sample": {"sampling/createMessage", map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hello"}}}, "maxTokens": 10}},
	"elicit": {"elicitation/create", map[string]any{"message": "your name?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}},
	"roots":  {"roots/list", map[string]any{}},
}

func (s *server) askClient(ctx context.Context, tool string, params, meta map[string]json.RawMessage) (any, *rpcError, bool) {
	req := clientRequests[tool]
	if _, modern := meta["io.modelcontextprotocol/protocolVersion"]; modern {
		var responses map[string]json.RawMessage
		_ = json.Unmarshal(params["inputResponses"], &responses)
		if r, ok := responses["u1"]; ok {
			return structured(map[string]any{"response": r, "requestState": params["requestState"]}), nil, true
		}
		return map[string]any{
			"resultType":    "input_required",
			"inputRequests": map[string]any{"u1": map[string]any{"method": req.method, "params": req.params}},
			"requestState":  "fake-state",
		}, nil, true
	}
	r, ok := s.ask(ctx, req.method, req.params)
	if !ok {
		return nil, nil, false
	}
	if r.Error != nil {
		return structured(map[string]any{"error": r.Error}), nil, true
	}
	return structured(map[string]any{"response": r.Result}), nil, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sleep(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}
