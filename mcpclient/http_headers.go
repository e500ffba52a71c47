package mcpclient

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/snodod/snodod/protocol"
)

// The headers of a 2026-07-28 request (docs/protocol.md §13.3, SEP-2243):
// MCP-Protocol-Version (the _meta version), Mcp-Method, Mcp-Name (the
// name of tools/call and prompts/get, the uri of resources/read), and one
// Mcp-Param-NAME per argument of a tools/call that the tool's inputSchema
// marks "x-mcp-header": NAME, as the server listed it.

// modernFrame is what the headers of a 2026 request are made from.
type modernFrame struct {
	Params struct {
		Name      json.RawMessage            `json:"name"`
		URI       json.RawMessage            `json:"uri"`
		Arguments map[string]json.RawMessage `json:"arguments"`
		Meta      struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
}

// modernHeaders sets a request's 2026 headers when its _meta carries the
// 2026 version (a request without is legacy: it gets none).
func (s *httpStream) modernHeaders(req *http.Request, m *Outgoing) {
	var f modernFrame
	if json.Unmarshal(m.Data, &f) != nil || f.Params.Meta.Version == "" {
		return
	}
	req.Header.Set("MCP-Protocol-Version", f.Params.Meta.Version)
	req.Header.Set("Mcp-Method", m.Method)
	var name string
	switch m.Method {
	case "tools/call", "prompts/get":
		name, _ = protocol.String(f.Params.Name)
	case "resources/read":
		name, _ = protocol.String(f.Params.URI)
	}
	if name != "" {
		req.Header.Set("Mcp-Name", headerValue(name))
	}
	if m.Method != "tools/call" || name == "" {
		return
	}
	s.mu.Lock()
	params := s.params[name]
	s.mu.Unlock()
	for header, path := range params {
		if v, ok := argumentText(f.Params.Arguments, path); ok {
			req.Header.Set("Mcp-Param-"+header, headerValue(v))
		}
	}
}

// argumentText is the argument at path as a header carries it: a string
// as it is, an integer in decimal, a boolean as true or false; ok is false
// for an absent or null one (no header), or any other value.
func argumentText(args map[string]json.RawMessage, path []string) (string, bool) {
	var raw json.RawMessage
	for i, p := range path {
		v, ok := args[p]
		if !ok {
			return "", false
		}
		if i == len(path)-1 {
			raw = v
			break
		}
		if json.Unmarshal(v, &args) != nil {
			return "", false
		}
	}
	if s, ok := protocol.String(raw); ok {
		return s, true
	}
	t := strings.TrimSpace(string(raw))
	switch {
	case t == "true", t == "false":
		return t, true
	case t != "" && t != "null" && strings.Trim(t, "-0123456789") == "":
		return t, true
	}
	return "", false
}

// headerValue is a value as a header carries it: as it is when it is
// visible ASCII with at most inner spaces, else =?base64?…?= (as is a
// value that looks like that form itself).
func headerValue(s string) string {
	plain := s == strings.TrimSpace(s) && !(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// learn reads what the stream needs of an answer: a legacy initialize's
// negotiated version, and a 2026 tools/list's Mcp-Param headers.
func (s *httpStream) learn(m *Outgoing, result json.RawMessage) {
	switch m.Method {
	case "initialize":
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(result, &r) == nil && r.ProtocolVersion != "" {
			s.mu.Lock()
			if s.mode == modeLegacy {
				s.sess.version = r.ProtocolVersion
			}
			s.mu.Unlock()
		}
	case "tools/list":
		if !bytes.Contains(result, []byte("x-mcp-header")) {
			return
		}
		var r struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if json.Unmarshal(result, &r) != nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, t := range r.Tools {
			if h := paramHeaders(t.InputSchema); len(h) > 0 {
				s.params[t.Name] = h
			} else {
				delete(s.params, t.Name)
			}
		}
	}
}

// paramHeaders maps the x-mcp-header names of a tool's inputSchema to the
// paths of their properties: those reached from the root through
// "properties" alone, on a string, integer or boolean.
func paramHeaders(schema json.RawMessage) map[string][]string {
	out := map[string][]string{}
	var walk func(raw json.RawMessage, path []string)
	walk = func(raw json.RawMessage, path []string) {
		var node struct {
			Header     *string                    `json:"x-mcp-header"`
			Type       json.RawMessage            `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(raw, &node) != nil {
			return
		}
		if node.Header != nil && len(path) > 0 && *node.Header != "" {
			switch typ, _ := protocol.String(node.Type); typ {
			case "string", "integer", "boolean":
				out[*node.Header] = append([]string(nil), path...)
			}
		}
		for name, child := range node.Properties {
			walk(child, append(path, name))
		}
	}
	walk(schema, nil)
	return out
}

// CheckParamHeaders says what breaks the rules of 2026-07-28 (SEP-2243)
// in a tool's x-mcp-header annotations, nil when nothing does (or it has
// none): each must be a non-empty header-name token (RFC 9110 §5.6.2),
// case-insensitively unique in the tool, on a string, integer or boolean
// property reached from the root through "properties" alone. A client
// leaves such a tool out of its list: the headers it would send for it
// cannot be trusted.
func CheckParamHeaders(schema json.RawMessage) error {
	if !strings.Contains(string(schema), "x-mcp-header") {
		return nil
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return fmt.Errorf("its inputSchema is not JSON: %w", err)
	}
	seen := map[string]bool{}
	var walk func(node any, depth int, chain bool) error
	walk = func(node any, depth int, chain bool) error {
		switch n := node.(type) {
		case []any:
			for _, v := range n {
				if err := walk(v, depth, false); err != nil {
					return err
				}
			}
		case map[string]any:
			if h, ok := n["x-mcp-header"]; ok {
				name, isString := h.(string)
				switch {
				case !chain || depth == 0:
					return errors.New("an x-mcp-header outside the chain of properties from the root")
				case !isString || name == "":
					return errors.New("an empty x-mcp-header")
				case !isHeaderToken(name):
					return fmt.Errorf("x-mcp-header %q is not a header-name token", name)
				case seen[strings.ToLower(name)]:
					return fmt.Errorf("x-mcp-header %q is used twice", name)
				}
				switch n["type"] {
				case "string", "integer", "boolean":
				default:
					return fmt.Errorf("x-mcp-header %q is on a %v, not a string, integer or boolean", name, n["type"])
				}
				seen[strings.ToLower(name)] = true
			}
			for k, v := range n {
				if props, ok := v.(map[string]any); ok && k == "properties" {
					for _, pv := range props {
						if err := walk(pv, depth+1, chain); err != nil {
							return err
						}
					}
					continue
				}
				if err := walk(v, depth, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, 0, true)
}

// isHeaderToken reports whether s is 1*tchar (RFC 9110 §5.6.2).
func isHeaderToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
