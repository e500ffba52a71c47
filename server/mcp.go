package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/snodod/snodod/protocol"
)

// This file is a minimal MCP runtime: enough of protocol.md (§2, §3.1, §3.2,
// §4.2, §6) for the legacy-era initialize, ping, tools/list and tools/call.
// The full dialects (2026-era _meta validation and result shaping,
// resources, prompts, JSON Schema validation, pagination) replace it in the
// next issue.

// Legacy protocol versions (protocol.md §1.1). An enabled version proposed
// by initialize is echoed; anything else gets the newest.
const (
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
)

// metaVersionKey in params._meta makes a request a 2026-era request
// (protocol.md §1.2).
const metaVersionKey = "io.modelcontextprotocol/protocolVersion"

// Info describes the server in the initialize result (protocol.md §3.5).
type Info struct {
	// Name defaults to "snodod".
	Name string
	// Version defaults to "dev".
	Version string
	// Instructions is sent only when non-empty.
	Instructions string
}

// Tool is one tool of the catalog.
type Tool struct {
	// Name is the tool's unique, non-empty name.
	Name string
	// Description is shown to the client; empty leaves it out.
	Description string
	// InputSchema is a JSON object schema ("type":"object" at the root).
	// Nil means {"type":"object"}. Until full JSON Schema validation
	// lands, only its "required" list is enforced before Handler runs;
	// Handler checks the types of the arguments it reads.
	InputSchema json.RawMessage
	// Handler runs the tool. It must not be nil.
	Handler ToolHandler
}

// ToolHandler runs a tool with its arguments, a JSON object. ctx ends when
// the request is cancelled, times out or its connection ends; progress is
// reported with ReportProgress(ctx, …). A non-nil error becomes an isError
// result holding the error's text, so it should tell the caller what to fix.
// A panic is recovered and answered -32603 "Tool raised an exception".
type ToolHandler func(ctx context.Context, args json.RawMessage) (*ToolResult, error)

// ToolResult is the result of tools/call (protocol.md §6.4).
type ToolResult struct {
	Content []Content `json:"content"`
	IsError bool      `json:"isError"`
}

// Content is one content block of a ToolResult. Only "text" blocks exist
// for now.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// MarshalJSON writes "text" for every text block, even an empty one, which
// the omitempty tag would drop.
func (c Content) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	var err error
	if c.Type == "text" {
		err = enc.Encode(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	} else {
		type plain Content // without this method
		err = enc.Encode(plain(c))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

// TextResult returns a successful result holding s as one text block.
func TextResult(s string) *ToolResult {
	return &ToolResult{Content: []Content{{Type: "text", Text: s}}}
}

// ErrorResult returns an isError result holding s as one text block: a
// failure the tool reports to the model (protocol.md §6.4).
func ErrorResult(s string) *ToolResult {
	return &ToolResult{Content: []Content{{Type: "text", Text: s}}, IsError: true}
}

// Server is the minimal MCP runtime: a tool catalog behind the Dispatcher
// interface. All methods may be called concurrently, AddTool included,
// while connections are being served.
type Server struct {
	info Info

	mu    sync.RWMutex
	tools map[string]*tool
}

// tool is a registered Tool with its schema's required list.
type tool struct {
	Tool
	required []string
}

var _ Dispatcher = (*Server)(nil)

// New returns a server with no tools; empty Info fields get their defaults.
func New(info Info) *Server {
	if info.Name == "" {
		info.Name = "snodod"
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	return &Server{info: info, tools: make(map[string]*tool)}
}

// AddTool registers t, replacing any tool of the same name. It panics on a
// programmer error: an empty name, a nil handler, or an InputSchema that is
// not a JSON object with "type":"object".
func (s *Server) AddTool(t Tool) {
	if t.Name == "" || t.Handler == nil {
		panic("server: AddTool needs a tool with a name and a handler")
	}
	if t.InputSchema == nil {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	var schema struct {
		Type     string   `json:"type"`
		Required []string `json:"required"`
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, t.InputSchema); err != nil || compact.Bytes()[0] != '{' ||
		json.Unmarshal(compact.Bytes(), &schema) != nil || schema.Type != "object" {
		panic(fmt.Sprintf("server: tool %q: InputSchema must be a JSON object schema with \"type\":\"object\"", t.Name))
	}
	t.InputSchema = compact.Bytes()
	s.mu.Lock()
	s.tools[t.Name] = &tool{Tool: t, required: schema.Required}
	s.mu.Unlock()
}

type capabilities struct {
	Tools struct {
		ListChanged bool `json:"listChanged"`
	} `json:"tools"`
}

type serverInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type initializeResult struct {
	ProtocolVersion string       `json:"protocolVersion"`
	Capabilities    capabilities `json:"capabilities"`
	ServerInfo      serverInfo   `json:"serverInfo"`
	Instructions    string       `json:"instructions,omitempty"`
}

var errInitializeParams = &protocol.Error{Code: protocol.CodeInvalidParams,
	Message: "initialize requires protocolVersion, capabilities and clientInfo name/version"}

// Initialize validates and negotiates a legacy initialize (protocol.md §2).
// It never blocks.
func (s *Server) Initialize(params json.RawMessage) (any, string, *protocol.Error) {
	p := members(params)
	version, ok := stringMember(p, "protocolVersion")
	client := members(p["clientInfo"]) // nil unless an object
	_, hasName := stringMember(client, "name")
	_, hasVersion := stringMember(client, "version")
	if !ok || version == "" || !isObject(p["capabilities"]) || !hasName || !hasVersion {
		return nil, "", errInitializeParams
	}
	if version != Version20250618 && version != Version20251125 {
		version = Version20251125
	}
	res := initializeResult{
		ProtocolVersion: version,
		ServerInfo:      serverInfo{Name: s.info.Name, Version: s.info.Version},
		Instructions:    s.info.Instructions,
	}
	res.Capabilities.Tools.ListChanged = true
	return res, version, nil
}

// Dispatch serves one request: ping, tools/list and tools/call, in the
// validation order of protocol.md §4.2, under the version the
// Mcp-Protocol-Version header names. initialize is Initialize's job and is
// -32601 here. 2026-era requests (params._meta holds the version key) are
// served the same way for now, without their _meta validation and result
// shaping, and with the 2025-11-25 form of argument errors.
func (s *Server) Dispatch(ctx context.Context, req *Request) Outcome {
	p := members(req.Params)
	meta, hasMeta := p["_meta"]
	metaMembers := members(meta)
	_, modern := metaMembers[metaVersionKey] // nil unless _meta is an object
	version := ""
	if !modern {
		version = req.Header.Get(HeaderProtocolVersion)
	}

	// The 2025 lifecycle allows pings before initialization (protocol.md §1.3).
	if !modern && version == "" && req.Method != "ping" {
		return errOutcome(protocol.CodeInvalidRequest, "No configured protocol dialect recognized the request")
	}

	var serve func(context.Context, string, map[string]json.RawMessage) Outcome
	switch {
	case req.Method == "ping" && !modern:
		serve = func(context.Context, string, map[string]json.RawMessage) Outcome {
			return Outcome{Result: struct{}{}}
		}
	case req.Method == "tools/list":
		serve = s.listTools
	case req.Method == "tools/call":
		serve = s.callTool
	case strings.HasPrefix(req.Method, "notifications/"):
		return errOutcome(protocol.CodeInvalidRequest, req.Method+" must be a notification, received request")
	case !modern && (req.Method == "sampling/createMessage" || req.Method == "elicitation/create" || req.Method == "roots/list"):
		return errOutcome(protocol.CodeInvalidRequest, "Method is not available in this direction")
	default:
		return errOutcome(protocol.CodeMethodNotFound, "Method not found: "+req.Method)
	}

	if hasMeta && !isObject(meta) {
		return errOutcome(protocol.CodeInvalidParams, "_meta must be an object")
	}
	if token, ok := metaMembers["progressToken"]; ok {
		if _, ok := protocol.ParseID(token); !ok {
			return Outcome{Err: protocol.ErrProgressToken}
		}
	}
	if !modern {
		_, inputs := p["inputResponses"]
		_, state := p["requestState"]
		if inputs || state {
			return errOutcome(protocol.CodeInvalidParams, "Tasks and multi-round-trip inputs are not supported")
		}
	}
	return serve(ctx, version, p)
}

type listedTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// listTools answers tools/list: every tool, sorted by name, on one page.
func (s *Server) listTools(context.Context, string, map[string]json.RawMessage) Outcome {
	s.mu.RLock()
	list := make([]listedTool, 0, len(s.tools))
	for _, t := range s.tools {
		list = append(list, listedTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	s.mu.RUnlock()
	slices.SortFunc(list, func(a, b listedTool) int { return strings.Compare(a.Name, b.Name) })
	return Outcome{Result: struct {
		Tools []listedTool `json:"tools"`
	}{list}}
}

type invalidArgumentsData struct {
	Detail string `json:"detail"`
}

// callTool answers tools/call: its params (protocol.md §6.2), the required
// arguments (§6.3), then the handler.
func (s *Server) callTool(ctx context.Context, version string, p map[string]json.RawMessage) Outcome {
	name, ok := stringMember(p, "name")
	if !ok {
		return errOutcome(protocol.CodeInvalidParams, "tools/call requires a string name")
	}
	args, ok := p["arguments"]
	if !ok {
		args = json.RawMessage(`{}`)
	} else if !isObject(args) {
		return errOutcome(protocol.CodeInvalidParams, "tools/call arguments must be an object")
	}
	s.mu.RLock()
	t := s.tools[name]
	s.mu.RUnlock()
	if t == nil {
		return errOutcome(protocol.CodeInvalidParams, "Unknown tool: "+name)
	}

	given := members(args)
	var missing []string
	for _, r := range t.required {
		if _, ok := given[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		detail := "Missing required arguments: " + strings.Join(missing, ", ")
		if version == Version20250618 {
			return Outcome{Err: &protocol.Error{Code: protocol.CodeInvalidParams,
				Message: "Invalid tool arguments", Data: invalidArgumentsData{detail}}}
		}
		return Outcome{Result: ErrorResult(detail)}
	}
	return runTool(ctx, t, args)
}

// runTool runs a handler, turning its error into an isError result and its
// panic into -32603 "Tool raised an exception" (protocol.md §6.4); the panic
// value and stack go to the log, never to the wire (transport.md §6).
func runTool(ctx context.Context, t *tool, args json.RawMessage) (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			slog.Default().Error("tool handler panicked",
				"tool", t.Name, "panic", v, "stack", string(debug.Stack()))
			out = Outcome{Err: protocol.ErrToolPanicked}
		}
	}()
	res, err := t.Handler(ctx, args)
	switch {
	case err != nil:
		res = ErrorResult(err.Error())
	case res == nil:
		slog.Default().Error("tool handler returned neither a result nor an error", "tool", t.Name)
		return Outcome{Err: protocol.ErrInvalidResult}
	case res.Content == nil:
		// "content" is always a list, never null.
		res = &ToolResult{Content: []Content{}, IsError: res.IsError}
	}
	return Outcome{Result: res}
}

func errOutcome(code int64, message string) Outcome {
	return Outcome{Err: &protocol.Error{Code: code, Message: message}}
}

// members returns the members of a JSON object, or nil when raw is absent
// or not an object. The transport's decoder has already refused duplicate
// keys; map keys, unlike struct fields, match case-sensitively.
func members(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if !isObject(raw) || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// stringMember returns the string value of m[name] and whether it is one.
func stringMember(m map[string]json.RawMessage, name string) (string, bool) {
	raw, ok := m[name]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// isObject reports whether raw, trimmed of white space, is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}
