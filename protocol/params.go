package protocol

import (
	"bytes"
	"encoding/json"
	"net/url"
)

// Parameter checks shared by the stdio and HTTP transports. Each answers
// the exact -32602 message of docs/protocol.md. params is the raw params object
// of a request that passed Decode: nil when absent, otherwise an object with
// unique member names.

const (
	msgInitialize          = "initialize requires protocolVersion, capabilities and clientInfo name/version"
	msgListenNotifications = "subscriptions/listen requires a notifications object"
	msgListenList          = "subscriptions/listen resourceSubscriptions must be a list"
	msgListenURIs          = "subscriptions/listen resourceSubscriptions must contain absolute URI strings"
	msgListenTooMany       = "subscriptions/listen resourceSubscriptions accepts at most 1000 URIs"

	// maxListenURIs bounds resourceSubscriptions (docs/protocol.md §9.1).
	maxListenURIs = 1000
)

// InitializeParams is a validated legacy initialize proposal (docs/protocol.md
// §2 step 1).
type InitializeParams struct {
	// ProtocolVersion is the proposed version, a non-empty string that
	// Versions.Negotiate answers.
	ProtocolVersion string
	// Capabilities is the client's capabilities object as sent.
	Capabilities json.RawMessage
	// ClientInfo is the client's clientInfo object as sent; its name and
	// version are strings.
	ClientInfo json.RawMessage
}

// DecodeInitialize validates a legacy initialize's params (docs/protocol.md §2
// step 1): protocolVersion a non-empty string, capabilities an object,
// clientInfo an object with string name and version. Anything else, absent
// params included, is -32602 "initialize requires protocolVersion,
// capabilities and clientInfo name/version". Other members are ignored.
func DecodeInitialize(params json.RawMessage) (*InitializeParams, *Error) {
	top, ok := Members(params)
	if !ok {
		return nil, invalidParams(msgInitialize)
	}
	version, ok := String(top["protocolVersion"])
	if !ok || version == "" || JSONKind(top["capabilities"]) != '{' {
		return nil, invalidParams(msgInitialize)
	}
	info, ok := Members(top["clientInfo"])
	if !ok {
		return nil, invalidParams(msgInitialize)
	}
	if _, ok := String(info["name"]); !ok {
		return nil, invalidParams(msgInitialize)
	}
	if _, ok := String(info["version"]); !ok {
		return nil, invalidParams(msgInitialize)
	}
	return &InitializeParams{
		ProtocolVersion: version,
		Capabilities:    top["capabilities"],
		ClientInfo:      top["clientInfo"],
	}, nil
}

// ListenFilter is a subscriptions/listen filter (docs/protocol.md §9.1, §9.2).
type ListenFilter struct {
	ToolsListChanged     bool
	PromptsListChanged   bool
	ResourcesListChanged bool
	// ResourceSubscriptions holds the requested absolute URIs,
	// de-duplicated, in first-seen order. It is nil when the member was
	// absent (or, after Accept, not accepted) and non-nil, possibly empty,
	// when it was sent.
	ResourceSubscriptions []string
}

// listenFlags are the boolean members of params.notifications, in the order
// they are checked.
var listenFlags = [...]string{"toolsListChanged", "promptsListChanged", "resourcesListChanged"}

// DecodeListen validates subscriptions/listen params (docs/protocol.md §9.1). In
// order, each -32602:
//
//   - params.notifications missing or not an object (null included):
//     "subscriptions/listen requires a notifications object";
//   - toolsListChanged, promptsListChanged, resourcesListChanged (checked in
//     that order) present and not a boolean: "subscriptions/listen <member>
//     must be a boolean";
//   - resourceSubscriptions present and not a list: "subscriptions/listen
//     resourceSubscriptions must be a list";
//   - more than 1,000 entries: "subscriptions/listen resourceSubscriptions
//     accepts at most 1000 URIs" (counted before the entries are parsed, so
//     that an oversized list costs no URI parsing);
//   - an entry that is not a string holding an absolute URI (IsAbsoluteURI):
//     "subscriptions/listen resourceSubscriptions must contain absolute URI
//     strings".
//
// Unknown members are ignored. Duplicates count toward the 1,000 limit and
// are then dropped.
func DecodeListen(params json.RawMessage) (*ListenFilter, *Error) {
	top, ok := Members(params)
	if !ok {
		return nil, invalidParams(msgListenNotifications)
	}
	notifications, ok := Members(top["notifications"])
	if !ok {
		return nil, invalidParams(msgListenNotifications)
	}
	var f ListenFilter
	flags := [...]*bool{&f.ToolsListChanged, &f.PromptsListChanged, &f.ResourcesListChanged}
	for i, name := range listenFlags {
		raw, present := notifications[name]
		if !present {
			continue
		}
		value, ok := jsonBool(raw)
		if !ok {
			return nil, invalidParams("subscriptions/listen " + name + " must be a boolean")
		}
		*flags[i] = value
	}
	raw, present := notifications["resourceSubscriptions"]
	if !present {
		return &f, nil
	}
	var entries []json.RawMessage
	if JSONKind(raw) != '[' || json.Unmarshal(raw, &entries) != nil {
		return nil, invalidParams(msgListenList)
	}
	if len(entries) > maxListenURIs {
		return nil, invalidParams(msgListenTooMany)
	}
	f.ResourceSubscriptions = make([]string, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for _, entry := range entries {
		uri, ok := String(entry)
		if !ok || !IsAbsoluteURI(uri) {
			return nil, invalidParams(msgListenURIs)
		}
		if !seen[uri] {
			seen[uri] = true
			f.ResourceSubscriptions = append(f.ResourceSubscriptions, uri)
		}
	}
	return &f, nil
}

// Accept returns the accepted filter of docs/protocol.md §9.2: each ListChanged
// member kept when requested and its listChanged is advertised;
// ResourceSubscriptions kept (a copy) when ResourcesSubscribe is advertised
// and nil otherwise. The result may be the empty filter.
func (f ListenFilter) Accept(caps ServerCapabilities) ListenFilter {
	accepted := ListenFilter{
		ToolsListChanged:     f.ToolsListChanged && caps.ToolsListChanged,
		PromptsListChanged:   f.PromptsListChanged && caps.PromptsListChanged,
		ResourcesListChanged: f.ResourcesListChanged && caps.ResourcesListChanged,
	}
	if caps.ResourcesSubscribe && f.ResourceSubscriptions != nil {
		accepted.ResourceSubscriptions = append(make([]string, 0, len(f.ResourceSubscriptions)), f.ResourceSubscriptions...)
	}
	return accepted
}

// IsAbsoluteURI reports whether s parses as a URI reference (net/url.Parse)
// with a non-empty scheme: "test://watched" and "urn:x" are absolute;
// "relative/path", "not a uri" and "" are not (docs/protocol.md §5.2, §9.1,
// §9.7).
func IsAbsoluteURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != ""
}

// invalidParams is a fresh -32602 error with message.
func invalidParams(message string) *Error {
	return &Error{Code: CodeInvalidParams, Message: message}
}

// JSONKind returns the first byte of the JSON value raw ('{', '[', '"', 't',
// 'f', 'n', '-' or a digit) after any leading whitespace, or 0 when raw is
// empty: the value's type, without decoding it or allocating.
func JSONKind(raw json.RawMessage) byte {
	for _, c := range raw {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}

// String decodes raw when it is a JSON string. It reports false for
// absent (nil) raw, null and every other value. A string without escapes
// costs one small allocation and no reflection.
func String(raw json.RawMessage) (string, bool) {
	if JSONKind(raw) != '"' {
		return "", false
	}
	if raw[0] != '"' || raw[len(raw)-1] > ' ' {
		raw = bytes.TrimSpace(raw) // the decoder's values have no spaces around them
	}
	if end, escaped := stringEnd(raw, 0); end == len(raw) && !escaped {
		return string(raw[1 : end-1]), true
	}
	return unquote(raw)
}

// jsonBool decodes raw when it is true or false.
func jsonBool(raw json.RawMessage) (bool, bool) {
	var b bool
	if k := JSONKind(raw); k != 't' && k != 'f' || json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}
