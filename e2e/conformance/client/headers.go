package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// paramHeader maps each Mcp-Param header name of a tool to the path of
// the argument it mirrors (SEP-2243).
type paramHeader map[string][]string

// paramHeaders reads a tool's x-mcp-header annotations, refusing the tool
// when one breaks the rules of 2026-07-28 (transports, custom headers):
// a non-empty token, case-insensitively unique, on a string, integer or
// boolean property reached from the root through properties alone.
func paramHeaders(schema json.RawMessage) (paramHeader, error) {
	if !strings.Contains(string(schema), "x-mcp-header") {
		return nil, nil
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, err
	}
	out := paramHeader{}
	seen := map[string]bool{}
	var walk func(node any, path []string, reachable bool) error
	walk = func(node any, path []string, reachable bool) error {
		switch n := node.(type) {
		case []any:
			for _, v := range n {
				if err := walk(v, path, false); err != nil {
					return err
				}
			}
		case map[string]any:
			if h, ok := n["x-mcp-header"]; ok {
				name, isString := h.(string)
				switch {
				case !reachable || len(path) == 0:
					return errors.New("an x-mcp-header outside the properties chain")
				case !isString || name == "":
					return errors.New("an empty x-mcp-header")
				case !isToken(name):
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
				out[name] = append([]string(nil), path...)
			}
			for k, v := range n {
				if k == "properties" {
					props, ok := v.(map[string]any)
					if !ok {
						continue
					}
					for pk, pv := range props {
						if err := walk(pv, append(path, pk), reachable); err != nil {
							return err
						}
					}
					continue
				}
				if err := walk(v, path, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, err
	}
	return out, nil
}

// isToken reports whether s is 1*tchar (RFC 9110 §5.6.2).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// modernHeaders are 2026's standard and mirrored headers: Mcp-Method,
// Mcp-Name for tools/call, prompts/get and resources/read, and the tool's
// Mcp-Param headers for the arguments present and not null.
func (c *mcpClient) modernHeaders(req *http.Request, method string, params map[string]any) {
	req.Header.Set("Mcp-Method", method)
	switch method {
	case "tools/call", "prompts/get":
		if name, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", encodeHeaderValue(name))
		}
	case "resources/read":
		if uri, ok := params["uri"].(string); ok {
			req.Header.Set("Mcp-Name", encodeHeaderValue(uri))
		}
	}
	if method != "tools/call" {
		return
	}
	name, _ := params["name"].(string)
	args, _ := params["arguments"].(map[string]any)
	for header, path := range c.tools[name] {
		var v any = args
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[p]
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case bool:
			s = strconv.FormatBool(x)
		case float64:
			s = strconv.FormatFloat(x, 'f', -1, 64)
		case int:
			s = strconv.Itoa(x)
		case json.Number:
			s = x.String()
		default:
			continue // absent, null or structured: no header
		}
		req.Header.Set("Mcp-Param-"+header, encodeHeaderValue(s))
	}
}

// encodeHeaderValue is a value as a header carries it: plain when it is
// visible ASCII with inner spaces, else =?base64?…?= (as is a plain value
// that looks like the sentinel).
func encodeHeaderValue(s string) string {
	plain := s == strings.TrimSpace(s) && !(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
	for i := 0; plain && i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
		}
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}
