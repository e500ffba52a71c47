package server

import (
	"bytes"
	"encoding/json"
)

// ToolParamHeaders returns the Mcp-Param-<Name> headers a 2026 client
// mirrors for the tool named name (SEP-2243, docs/protocol.md §13.3): each
// inputSchema property with "x-mcp-header": "<Name>", mapped from the
// header name to the argument's name. ok is false when no such tool is
// registered. The Streamable HTTP transport checks the headers against the
// arguments before dispatch.
func (s *Server) ToolParamHeaders(name string) (headers map[string]string, ok bool) {
	s.mu.RLock()
	e := s.tools[name]
	s.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	schema := e.tool.InputSchema
	if !bytes.Contains(schema, []byte(`"x-mcp-header"`)) {
		return nil, true // the common case, without decoding the schema
	}
	var root struct {
		Properties map[string]struct {
			Header string `json:"x-mcp-header"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &root) != nil {
		return nil, true
	}
	for arg, p := range root.Properties {
		if p.Header == "" {
			continue
		}
		if headers == nil {
			headers = map[string]string{}
		}
		headers[p.Header] = arg
	}
	return headers, true
}
