package server

import (
	"context"
	"encoding/json"

	"github.com/snodod/snodod/protocol"
)

// This file holds the catalog's public types: what a Go developer registers
// and what handlers receive and return. Field names follow MCP; the JSON
// shapes are those of docs/protocol.md §6 to §8.

// Annotations are hints about content or a resource.
type Annotations struct {
	Audience     []string `json:"audience,omitempty"`
	Priority     *float64 `json:"priority,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
}

// ToolAnnotations are hints about a tool's behaviour.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Tool describes one tool (docs/protocol.md §6.1).
type Tool struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON Schema (2020-12 unless $schema says otherwise).
	// Nil means {"type":"object"}. AddTool infers it from In.
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema, when set, is what structuredContent must conform to.
	// AddTool infers it from Out unless Out is any.
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Icons        []protocol.Icon  `json:"icons,omitempty"`
	Meta         map[string]any   `json:"_meta,omitempty"`
}

// ToolHandler runs a tool. ctx ends when the request is cancelled, times out
// or its connection ends; progress is reported with ReportProgress(ctx, …),
// log messages with Log(ctx, …), client input is asked for with Elicit,
// Sample or ListRoots. A returned error is a failure the tool reports: an
// isError result holding its text (unless it is an input request, see
// Elicit). A panic is answered -32603 "Tool raised an exception".
type ToolHandler func(ctx context.Context, req *CallToolRequest) (*CallToolResult, error)

// CallToolRequest is a tools/call as a handler sees it.
type CallToolRequest struct {
	Name string
	// Arguments is the arguments object ({} when absent), already
	// validated against the tool's input schema.
	Arguments json.RawMessage
	// Version is the protocol version the request is served under.
	Version string
	// ClientCapabilities is the client's capabilities object: from the
	// request's _meta in 2026, from initialize in legacy eras.
	ClientCapabilities json.RawMessage
	// ProgressToken is the request's progressToken (a string or a
	// json.Number), or nil. Progress is reported with ReportProgress; the
	// token is here for tools that echo or log it.
	ProgressToken any

	// args are Arguments' members when the decoder or the runtime split
	// them already (argsOK), for a typed tool's decoder.
	args   protocol.Object
	argsOK bool
}

// argumentMembers returns Arguments split into members, splitting them
// unless that was done; ok is false when they are not an object.
func (r *CallToolRequest) argumentMembers() (members protocol.Object, ok bool) {
	if !r.argsOK {
		r.args, r.argsOK = protocol.SplitObject(nil, r.Arguments)
	}
	return r.args, r.argsOK
}

// CallToolResult is the result of tools/call (docs/protocol.md §6.4).
type CallToolResult struct {
	Content []Content `json:"content"`
	// StructuredContent is any JSON value in 2026; legacy eras keep it
	// only when it is an object. When Content is empty, a text block
	// holding its compact JSON is added.
	StructuredContent any            `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta,omitempty"`
}

// Content is one content block: text, image, audio, resource_link or
// resource. Build it with TextContent, ImageContent, AudioContent,
// ResourceLinkContent or EmbeddedResource.
type Content struct {
	// Type is "text", "image", "audio", "resource_link" or "resource".
	Type string
	// Text of a "text" block.
	Text string
	// Data of an "image" or "audio" block (written in base64).
	Data []byte
	// MIMEType of an image, audio or resource_link block.
	MIMEType string
	// Link is the resource of a "resource_link" block.
	Link *Resource
	// Resource is the contents of an embedded "resource" block.
	Resource    *ResourceContents
	Annotations *Annotations
	Meta        map[string]any
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: "text", Text: text} }

// ImageContent returns an image block.
func ImageContent(data []byte, mimeType string) Content {
	return Content{Type: "image", Data: data, MIMEType: mimeType}
}

// AudioContent returns an audio block.
func AudioContent(data []byte, mimeType string) Content {
	return Content{Type: "audio", Data: data, MIMEType: mimeType}
}

// ResourceLinkContent returns a resource_link block pointing at r.
func ResourceLinkContent(r *Resource) Content { return Content{Type: "resource_link", Link: r} }

// EmbeddedResource returns a resource block holding rc.
func EmbeddedResource(rc *ResourceContents) Content { return Content{Type: "resource", Resource: rc} }

// Resource describes a resource (docs/protocol.md §7).
type Resource struct {
	URI         string          `json:"uri"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MIMEType    string          `json:"mimeType,omitempty"`
	Size        *int64          `json:"size,omitempty"`
	Annotations *Annotations    `json:"annotations,omitempty"`
	Icons       []protocol.Icon `json:"icons,omitempty"`
	Meta        map[string]any  `json:"_meta,omitempty"`
}

// ResourceTemplate describes a family of resources by an RFC 6570 URI
// template (level 1: {var} expansions).
type ResourceTemplate struct {
	URITemplate string          `json:"uriTemplate"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MIMEType    string          `json:"mimeType,omitempty"`
	Annotations *Annotations    `json:"annotations,omitempty"`
	Icons       []protocol.Icon `json:"icons,omitempty"`
	Meta        map[string]any  `json:"_meta,omitempty"`
}

// ResourceContents is one entry of a read: Text, or Blob (written in
// base64) when Blob is non-nil.
type ResourceContents struct {
	URI      string         `json:"uri"`
	MIMEType string         `json:"mimeType,omitempty"`
	Text     string         `json:"text,omitempty"`
	Blob     []byte         `json:"blob,omitempty"`
	Meta     map[string]any `json:"_meta,omitempty"`
}

// ResourceHandler reads a resource. For a template, Params holds the
// template's variables matched from the URI. Returning ErrResourceNotFound
// (or an error wrapping it) answers "Resource not found".
type ResourceHandler func(ctx context.Context, req *ReadResourceRequest) (*ReadResourceResult, error)

// ReadResourceRequest is a resources/read as a handler sees it.
type ReadResourceRequest struct {
	URI     string
	Params  map[string]string
	Version string
}

// ReadResourceResult is the result of resources/read. Contents must not be
// empty. CacheTTL and CacheScope, when set, override the server's cache
// fields for this read (2026 only, docs/protocol.md §10.2).
type ReadResourceResult struct {
	Contents   []ResourceContents
	CacheTTL   *int64 // milliseconds
	CacheScope string // "public" or "private"
}

// Prompt describes a prompt (docs/protocol.md §8.1).
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Icons       []protocol.Icon  `json:"icons,omitempty"`
	Meta        map[string]any   `json:"_meta,omitempty"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// PromptHandler renders a prompt. Required arguments are checked before it
// runs.
type PromptHandler func(ctx context.Context, req *GetPromptRequest) (*GetPromptResult, error)

// GetPromptRequest is a prompts/get as a handler sees it.
type GetPromptRequest struct {
	Name      string
	Arguments map[string]string
	Version   string
}

// GetPromptResult is the result of prompts/get.
type GetPromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
}

// PromptMessage is one message of a rendered prompt; Role is "user" or
// "assistant".
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// CompletionHandler proposes values for one argument of a prompt or a
// resource template. value is what the user typed so far; context holds the
// other arguments already chosen. The runtime keeps at most 100 values and
// reports the full count.
type CompletionHandler func(ctx context.Context, value string, context map[string]string) ([]string, error)
