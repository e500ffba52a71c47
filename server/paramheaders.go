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
// arguments before dispatch. The map is the tool's, found once when it was
// registered: the caller must not modify it.
func (s *Server) ToolParamHeaders(name string) (headers map[string]string, ok bool) {
	s.mu.RLock()
	e := s.tools[name]
	s.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	return e.paramHeaders, true
}

// paramHeaders finds the mirrored headers of an input schema (see
// ToolParamHeaders), nil when it has none.
func paramHeaders(schema json.RawMessage) (headers map[string]string) {
	if !bytes.Contains(schema, []byte(`"x-mcp-header"`)) {
		return nil // the common case, without decoding the schema
	}
	var root struct {
		Properties map[string]struct {
			Header string `json:"x-mcp-header"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &root) != nil {
		return nil
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
	return headers
}
