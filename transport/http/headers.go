package http

import (
	"encoding/base64"
	"encoding/json"
	nethttp "net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/snodod/snodod/protocol"
)

// The request headers a 2026 POST carries besides its body (docs/protocol.md
// §13.3, SEP-2243), checked at §5.2 step 6: a load balancer may route on
// them without parsing the body, so they must say what the body says.

// ParamHeaders is implemented by a Dispatcher that can say which arguments
// of a tool are mirrored into Mcp-Param-<Name> headers (an inputSchema
// property with "x-mcp-header": "<Name>"). It returns the header names
// (as the schema spells them) mapped to argument names; ok is false for an
// unknown tool. A Dispatcher without it gets no Mcp-Param check.
type ParamHeaders interface {
	ToolParamHeaders(tool string) (headers map[string]string, ok bool)
}

const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	headerParamPrefix     = "Mcp-Param-"
	headerSessionID       = "Mcp-Session-Id"
)

type versionMismatchData struct {
	Header *string `json:"header"`
	Body   string  `json:"body"`
}

type headerMismatchData struct {
	Header string `json:"header"`
}

func headerMismatch(name string) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeHeaderMismatch, Message: "Request header does not match the request body",
		Data: headerMismatchData{Header: name}}
}

// checkModernHeaders runs §5.2 step 6 on a 2026 request.
func checkModernHeaders(h nethttp.Header, msg *protocol.Message, version string, disp any) *protocol.Error {
	values := h.Values(headerProtocolVersion)
	if len(values) != 1 || strings.TrimSpace(values[0]) != version {
		data := versionMismatchData{Body: version}
		if len(values) > 0 {
			v := values[0]
			data.Header = &v
		}
		return &protocol.Error{Code: protocol.CodeHeaderMismatch, Message: "Protocol header does not match request metadata", Data: data}
	}
	method := msg.Method
	if !headerEquals(h, headerMethod, method) {
		return headerMismatch(headerMethod)
	}
	var nameMember string
	switch method {
	case "tools/call", "prompts/get":
		nameMember = "name"
	case "resources/read":
		nameMember = "uri"
	}
	if nameMember != "" {
		if want, ok := protocol.String(msg.Members.Value(nameMember)); ok && !headerEquals(h, headerName, want) {
			return headerMismatch(headerName)
		}
	}
	if method != "tools/call" {
		return nil
	}
	ph, ok := disp.(ParamHeaders)
	if !ok {
		return nil
	}
	tool, _ := protocol.String(msg.Members.Value("name"))
	mirrored, ok := ph.ToolParamHeaders(tool)
	if !ok || len(mirrored) == 0 {
		return nil
	}
	for header, arg := range mirrored {
		name := headerParamPrefix + header
		raw, present := msg.Arguments.Get(arg)
		if !present || string(raw) == "null" {
			if len(h.Values(name)) > 0 {
				return headerMismatch(name)
			}
			continue
		}
		if !paramMatches(h, name, raw) {
			return headerMismatch(name)
		}
	}
	return nil
}

// headerEquals: exactly one value, which, stripped of surrounding
// whitespace and base64-decoded when it uses the =?base64?…?= sentinel,
// equals want (case-sensitive).
func headerEquals(h nethttp.Header, name, want string) bool {
	got, ok := headerValue(h, name)
	return ok && got == want
}

// headerValue returns the one value of header name, decoded.
func headerValue(h nethttp.Header, name string) (string, bool) {
	values := h.Values(name)
	if len(values) != 1 {
		return "", false
	}
	return decodeHeaderValue(strings.Trim(values[0], " \t"))
}

// decodeHeaderValue decodes the =?base64?…?= form strictly (standard
// alphabet, padding required, UTF-8 result); any other value is literal.
func decodeHeaderValue(v string) (string, bool) {
	const prefix, suffix = "=?base64?", "?="
	if len(v) < len(prefix)+len(suffix) || !strings.HasPrefix(v, prefix) || !strings.HasSuffix(v, suffix) {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len(prefix) : len(v)-len(suffix)])
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// paramMatches compares a mirrored argument with its header: strings
// exactly, integers numerically, booleans as true/false.
func paramMatches(h nethttp.Header, name string, raw json.RawMessage) bool {
	got, ok := headerValue(h, name)
	if !ok {
		return false
	}
	if s, isString := protocol.String(raw); isString {
		return got == s
	}
	text := strings.TrimSpace(string(raw))
	switch text {
	case "true", "false":
		return got == text
	}
	want, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return false // a float or a structured value cannot be mirrored
	}
	n, err := strconv.ParseInt(got, 10, 64)
	return err == nil && n == want
}
