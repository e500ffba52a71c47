package server

import (
	"bytes"
	"encoding/json"

	"github.com/snodod/snodod/protocol"
)

// This file holds what makes a client's answer fit its request, in both
// eras: elicitation (action, and content against the requested schema),
// sampling (role, content and model) and roots (a list of uris)
// (docs/protocol.md §3.1, §12.3). An answer that does not fit is refused before
// the handler sees it.

// fitsRequestedSchema checks accepted content against the schema the
// handler asked with (docs/protocol.md §14.4 case 33: a label that is not a
// string does not fit). An answer that fits is the handler's to use; one
// that does not is answered "Invalid input response".
func fitsRequestedSchema(requested any, out *ElicitResult) bool {
	if requested == nil || out.Action != "accept" {
		return true
	}
	raw, err := json.Marshal(requested)
	if err != nil {
		return false
	}
	sch, err := compileSchema(raw)
	if err != nil {
		return false
	}
	content := out.Content
	if content == nil {
		content = map[string]any{}
	}
	return sch.validateValue(content) == nil
}

// decodeElicitResult fits an elicitation answer (docs/protocol.md §12.3): action
// accept, decline or cancel; content, when present, an object of strings,
// numbers, booleans and string lists. A form accept needs content; a url
// accept carries none.
func decodeElicitResult(raw json.RawMessage, urlMode bool, out *ElicitResult) bool {
	var m struct {
		Action  *string                    `json:"action"`
		Content map[string]json.RawMessage `json:"content"`
	}
	if !isJSONObject(raw) || json.Unmarshal(raw, &m) != nil || m.Action == nil {
		return false
	}
	switch *m.Action {
	case "accept", "decline", "cancel":
	default:
		return false
	}
	var buf [8]protocol.Member
	members, _ := protocol.SplitObject(buf[:0], raw)
	hasContent := members.Has("content")
	if hasContent && m.Content == nil { // content: null
		return false
	}
	if *m.Action == "accept" && !urlMode && !hasContent {
		return false
	}
	for _, v := range m.Content {
		if !isFormValue(v) {
			return false
		}
	}
	out.Action = *m.Action
	if len(m.Content) > 0 {
		out.Content = make(map[string]any, len(m.Content))
		for k, v := range m.Content {
			var x any
			if json.Unmarshal(v, &x) != nil {
				return false
			}
			out.Content[k] = x
		}
	}
	return true
}

// isFormValue reports whether v is a string, a number, a boolean or a list
// of strings.
func isFormValue(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	switch c := v[0]; {
	case c == '"', c == 't', c == 'f', c == '-', c >= '0' && c <= '9':
		return true
	case c == '[':
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			return false
		}
		for _, s := range list {
			if s = bytes.TrimSpace(s); len(s) == 0 || s[0] != '"' {
				return false
			}
		}
		return true
	}
	return false
}

// decodeSamplingResult fits a sampling answer: a role string, a content
// object or list, and a model string.
func decodeSamplingResult(raw json.RawMessage, out *CreateMessageResult) bool {
	var m struct {
		Role       *string         `json:"role"`
		Content    json.RawMessage `json:"content"`
		Model      *string         `json:"model"`
		StopReason *string         `json:"stopReason"`
	}
	if !isJSONObject(raw) || json.Unmarshal(raw, &m) != nil || m.Role == nil || m.Model == nil {
		return false
	}
	if c := bytes.TrimSpace(m.Content); len(c) == 0 || (c[0] != '{' && c[0] != '[') {
		return false
	}
	*out = CreateMessageResult{Role: *m.Role, Content: m.Content, Model: *m.Model}
	if m.StopReason != nil {
		out.StopReason = *m.StopReason
	}
	return true
}

// decodeRootsResult fits a roots answer: roots, a list of objects with a
// string uri (and, when present, a string name).
func decodeRootsResult(raw json.RawMessage, out *ListRootsResult) bool {
	var m struct {
		Roots []json.RawMessage `json:"roots"`
	}
	if !isJSONObject(raw) || json.Unmarshal(raw, &m) != nil || m.Roots == nil {
		return false
	}
	roots := make([]Root, 0, len(m.Roots))
	for _, r := range m.Roots {
		var x struct {
			URI  *string `json:"uri"`
			Name *string `json:"name"`
		}
		if !isJSONObject(r) || json.Unmarshal(r, &x) != nil || x.URI == nil {
			return false
		}
		root := Root{URI: *x.URI}
		if x.Name != nil {
			root.Name = *x.Name
		}
		roots = append(roots, root)
	}
	out.Roots = roots
	return true
}

func isJSONObject(raw json.RawMessage) bool { return protocol.JSONKind(raw) == '{' }
