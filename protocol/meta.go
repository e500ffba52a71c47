package protocol

import (
	"encoding/json"
	"strings"
)

// RequestMeta is the request metadata of a 2026-era request (docs/protocol.md
// §5.1), as DecodeMeta found it. Only the presence and shape checks of §5.2
// steps 3 to 5 have been applied; Check applies steps 7 and 8.
type RequestMeta struct {
	// ProtocolVersion is the string sent as
	// io.modelcontextprotocol/protocolVersion, whatever it is.
	ProtocolVersion string
	// ClientCapabilities is the io.modelcontextprotocol/clientCapabilities
	// object as sent.
	ClientCapabilities json.RawMessage
	// ClientInfo is io.modelcontextprotocol/clientInfo as sent, or nil when
	// absent. Check validates it.
	ClientInfo json.RawMessage
	// LogLevel is io.modelcontextprotocol/logLevel when it is a string, ""
	// when absent. Check validates it.
	LogLevel string
	// ProgressToken is progressToken as sent, or nil when absent. Check
	// validates it.
	ProgressToken json.RawMessage
	// Members holds every _meta member, reserved or not, for handlers and
	// echo.
	Members Object
}

// Messages of the _meta checks (docs/protocol.md §4.2, §5.2), each -32602.
const (
	msgMetaObject          = "_meta must be an object"
	msgMetaKey             = "_meta contains an invalid key or non-JSON value"
	msgVersionString       = MetaProtocolVersion + " must be a string"
	msgVersionMissing      = "Missing required " + MetaProtocolVersion + " metadata"
	msgCapabilitiesMissing = "Missing required " + MetaClientCapabilities + " metadata"
	msgCapabilitiesObject  = "Client capabilities must be an object"
	msgLogLevel            = "Invalid MCP request log level"
	msgClientInfo          = "Invalid client info metadata"
	msgClientCapabilities  = "Invalid client capabilities metadata"
	msgTasksUnsupported    = "Tasks and multi-round-trip inputs are not supported"
	msgUnsupportedVersion  = "Unsupported protocol version"
)

// metaProgressTokenMember is the _meta member carrying a progress token
// (docs/transport.md §10.1).
const metaProgressTokenMember = "progressToken"

// unsupportedVersionData is the data of -32022; its field order is the wire
// order of docs/protocol.md §5.2 step 7.
type unsupportedVersionData struct {
	Requested string   `json:"requested"`
	Supported []string `json:"supported"`
}

// DecodeModernMeta is what the HTTP transport does with a request routed
// to the 2026 rules (docs/protocol.md §13.2) before the runtime sees it:
// docs/protocol.md §5.2 steps 2 to 5 on a 2026-era request's split params
// (the decoder's, Message.Split, or SplitParams'; the zero Split when
// params are absent) and returns its metadata. In order, each -32602:
//
//   - params nil (or null) or without _meta: "Required request _meta is
//     missing" (reachable over HTTP only; on stdio the era rule of §1.2
//     guarantees _meta);
//   - _meta not an object (null included): "_meta must be an object";
//   - then the checks of DecodeMeta.
func DecodeModernMeta(p *Split) (*RequestMeta, *Error) {
	m := new(RequestMeta)
	if err := m.DecodeModern(p); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeModern is DecodeModernMeta into m, for a caller that keeps the
// metadata in a structure of its own (the runtime's admission); m is
// overwritten, and is partly set on error.
func (m *RequestMeta) DecodeModern(p *Split) *Error {
	if !p.Members.Has("_meta") {
		*m = RequestMeta{}
		return invalidParams("Required request _meta is missing")
	}
	if !p.MetaObject {
		*m = RequestMeta{}
		return invalidParams(msgMetaObject)
	}
	return m.Decode(p.Meta)
}

// DecodeMeta runs docs/protocol.md §5.2 steps 3 to 5 on a 2026-era request's
// _meta, split into members (Split.Meta: step 2, the presence of an object
// _meta, is the caller's; on stdio the era rule of §1.2 guarantees it). In
// order, each -32602:
//
//   - a member name outside the §5.1 key grammar: "_meta contains an invalid
//     key or non-JSON value";
//   - io.modelcontextprotocol/protocolVersion absent: "Missing required
//     io.modelcontextprotocol/protocolVersion metadata", not a string:
//     "io.modelcontextprotocol/protocolVersion must be a string";
//   - io.modelcontextprotocol/clientCapabilities absent: "Missing required
//     io.modelcontextprotocol/clientCapabilities metadata" (the key named, as
//     for the version), not an object: "Client capabilities must be an
//     object".
func DecodeMeta(meta Object) (*RequestMeta, *Error) {
	m := new(RequestMeta)
	if err := m.Decode(meta); err != nil {
		return nil, err
	}
	return m, nil
}

// Decode is DecodeMeta into m, for a caller that keeps the metadata in a
// structure of its own; m is overwritten, and is partly set on error.
func (m *RequestMeta) Decode(meta Object) *Error {
	*m = RequestMeta{Members: meta}
	var rawVersion json.RawMessage
	found := false
	for _, mb := range meta {
		// One pass checks the names and finds the members the request
		// carries; the reserved names are valid keys.
		switch mb.Name {
		case MetaProtocolVersion:
			rawVersion, found = mb.Value, true
		case MetaClientCapabilities:
			m.ClientCapabilities = mb.Value
		case MetaClientInfo:
			m.ClientInfo = mb.Value
		case MetaLogLevel:
			m.LogLevel, _ = String(mb.Value)
		case metaProgressTokenMember:
			m.ProgressToken = mb.Value
		default:
			if !validMetaKey(mb.Name) {
				return invalidParams(msgMetaKey)
			}
		}
	}
	if !found {
		return invalidParams(msgVersionMissing)
	}
	var ok bool
	if m.ProtocolVersion, ok = knownVersion(rawVersion); !ok {
		if m.ProtocolVersion, ok = String(rawVersion); !ok {
			return invalidParams(msgVersionString)
		}
	}
	if m.ClientCapabilities == nil {
		return invalidParams(msgCapabilitiesMissing)
	}
	if JSONKind(m.ClientCapabilities) != '{' {
		return invalidParams(msgCapabilitiesObject)
	}
	return nil
}

// knownVersion returns the version string for the raw text of a version
// snodod knows ("2026-07-28" as sent, quotes included), sparing the
// string a request would otherwise allocate.
func knownVersion(raw json.RawMessage) (string, bool) {
	for _, v := range versionOrder {
		if len(raw) == len(v)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == v {
			return v, true
		}
	}
	return "", false
}

// Check runs docs/protocol.md §5.2 steps 7 and 8 on metadata from
// DecodeMeta or DecodeModernMeta, against the enabled versions. In order:
//
//   - the version is not 2026-07-28, or 2026-07-28 is disabled: -32022
//     "Unsupported protocol version" with data
//     {"requested":"<as sent>","supported":[<enabled 2026-era versions>]};
//   - a progressToken that is not a bounded id (docs/transport.md §10.1):
//     ErrProgressToken;
//   - a logLevel that is not one of the eight level strings: -32602 "Invalid
//     MCP request log level";
//   - clientInfo that is not an object with string name and version, or has
//     a non-string title or description, a websiteUrl that is not an
//     absolute URI string, or icons that are not a list of objects with a
//     string src: -32602 "Invalid client info metadata";
//   - clientCapabilities where roots, sampling, elicitation, experimental,
//     extensions, sampling.context, sampling.tools, elicitation.form or
//     elicitation.url is present and not an object (null included), or an
//     extensions member name is not a prefixed _meta key ("<prefix>/<name>"
//     in the §5.1 grammar): -32602 "Invalid client capabilities metadata".
//     Unknown members are tolerated.
//
// Check returns nil when the request may proceed to method availability.
func (m *RequestMeta) Check(enabled Versions) *Error {
	if m.ProtocolVersion != Version2026 || !enabled.Enabled(Version2026) {
		return &Error{
			Code:    CodeUnsupportedVersion,
			Message: msgUnsupportedVersion,
			Data:    unsupportedVersionData{Requested: m.ProtocolVersion, Supported: enabled.Modern()},
		}
	}
	if m.ProgressToken != nil {
		if _, ok := ParseID(m.ProgressToken); !ok {
			return ErrProgressToken
		}
	}
	if raw, ok := m.Members.Get(MetaLogLevel); ok {
		level, ok := String(raw)
		if _, known := LogLevelRank(level); !ok || !known {
			return invalidParams(msgLogLevel)
		}
	}
	if m.ClientInfo != nil && !validClientInfo(m.ClientInfo) {
		return invalidParams(msgClientInfo)
	}
	if !validClientCapabilities(m.ClientCapabilities) {
		return invalidParams(msgClientCapabilities)
	}
	return nil
}

// validClientInfo applies the clientInfo rules of docs/protocol.md §5.2 step 8.
func validClientInfo(raw json.RawMessage) bool {
	var buf [8]Member
	info, ok := SplitObject(buf[:0], raw)
	if !ok {
		return false
	}
	for _, required := range [...]string{"name", "version"} {
		if JSONKind(info.Value(required)) != '"' {
			return false
		}
	}
	for _, optional := range [...]string{"title", "description"} {
		if v, present := info.Get(optional); present && JSONKind(v) != '"' {
			return false
		}
	}
	if v, present := info.Get("websiteUrl"); present {
		if s, ok := String(v); !ok || !IsAbsoluteURI(s) {
			return false
		}
	}
	if v, present := info.Get("icons"); present {
		var icons []json.RawMessage
		if JSONKind(v) != '[' || json.Unmarshal(v, &icons) != nil {
			return false
		}
		for _, icon := range icons {
			fields, ok := SplitObject(buf[:0], icon)
			if !ok || JSONKind(fields.Value("src")) != '"' {
				return false
			}
		}
	}
	return true
}

// validClientCapabilities applies the clientCapabilities rules of
// docs/protocol.md §5.2 step 8.
func validClientCapabilities(raw json.RawMessage) bool {
	var buf, innerBuf [8]Member
	caps, ok := SplitObject(buf[:0], raw)
	if !ok {
		return false
	}
	for _, name := range [...]string{"roots", "experimental"} {
		if !optionalObject(caps, name) {
			return false
		}
	}
	for _, group := range [...][3]string{
		{"sampling", "context", "tools"},
		{"elicitation", "form", "url"},
	} {
		v, present := caps.Get(group[0])
		if !present {
			continue
		}
		inner, ok := SplitObject(innerBuf[:0], v)
		if !ok || !optionalObject(inner, group[1]) || !optionalObject(inner, group[2]) {
			return false
		}
	}
	if v, present := caps.Get("extensions"); present {
		extensions, ok := SplitObject(innerBuf[:0], v)
		if !ok {
			return false
		}
		for _, ext := range extensions {
			if !strings.Contains(ext.Name, "/") || !validMetaKey(ext.Name) {
				return false
			}
		}
	}
	return true
}

// optionalObject reports whether the member name is absent or an object.
func optionalObject(members Object, name string) bool {
	v, present := members.Get(name)
	return !present || JSONKind(v) == '{'
}

// CheckLegacyMeta runs docs/protocol.md §4.2 steps 5 and 6 on a legacy-era
// request's split params. In order:
//
//   - _meta present and not an object (null included): -32602 "_meta must be
//     an object";
//   - _meta.progressToken present and not a bounded id: ErrProgressToken;
//   - inputResponses or requestState present (whatever their value): -32602
//     "Tasks and multi-round-trip inputs are not supported".
//
// No other _meta check applies in the legacy eras; names outside the key
// grammar and the 2026 members are ignored.
func CheckLegacyMeta(p *Split) *Error {
	if p.Members.Has("_meta") {
		if !p.MetaObject {
			return invalidParams(msgMetaObject)
		}
		if tok, present := p.Meta.Get(metaProgressTokenMember); present {
			if _, ok := ParseID(tok); !ok {
				return ErrProgressToken
			}
		}
	}
	if p.Members.Has("inputResponses") || p.Members.Has("requestState") {
		return invalidParams(msgTasksUnsupported)
	}
	return nil
}

// logLevels are the eight levels of docs/protocol.md §5.1 and §11, least severe
// first.
var logLevels = [...]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// LogLevelRank returns the severity of a log level, 0 for debug up to 7 for
// emergency, in the order debug, info, notice, warning, error, critical,
// alert, emergency (docs/protocol.md §5.1, §11). A message is written when its
// rank is at least the threshold's. ok is false for any other string; level
// names are case-sensitive.
func LogLevelRank(level string) (rank int, ok bool) {
	for i, name := range logLevels {
		if level == name {
			return i, true
		}
	}
	return 0, false
}

// LogLevelName is the inverse of LogLevelRank: the level of rank 0
// (debug) to 7 (emergency). ok is false for any other rank.
func LogLevelName(rank int) (level string, ok bool) {
	if rank < 0 || rank >= len(logLevels) {
		return "", false
	}
	return logLevels[rank], true
}

// validMetaKey reports whether key follows the _meta key grammar of
// docs/protocol.md §5.1: an optional prefix of dot-separated labels, each starting
// with a letter, ending with a letter or digit and holding letters, digits
// and hyphens inside, followed by "/"; then a name that starts and ends with
// a letter or digit and holds letters, digits, "-", "_" and "." inside.
// Letters and digits are ASCII. The name is never empty, so "" and "a/" are
// refused, as are "/x" (an empty prefix) and "a/b/c".
func validMetaKey(key string) bool {
	if prefix, name, found := strings.Cut(key, "/"); found {
		return validMetaPrefix(prefix) && validMetaName(name)
	}
	return validMetaName(key)
}

func validMetaPrefix(prefix string) bool {
	for {
		label, rest, more := strings.Cut(prefix, ".")
		if !validLabel(label) {
			return false
		}
		if !more {
			return true
		}
		prefix = rest
	}
}

// validLabel: a letter, then letters, digits and hyphens, ending with a
// letter or digit.
func validLabel(label string) bool {
	n := len(label)
	if n == 0 || !isLetter(label[0]) || !isAlnum(label[n-1]) {
		return false
	}
	for i := 1; i < n-1; i++ {
		if c := label[i]; !isAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

// validMetaName: a letter or digit, then letters, digits, "-", "_" and ".",
// ending with a letter or digit.
func validMetaName(name string) bool {
	n := len(name)
	if n == 0 || !isAlnum(name[0]) || !isAlnum(name[n-1]) {
		return false
	}
	for i := 1; i < n-1; i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isAlnum(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' }
