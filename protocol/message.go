package protocol

import (
	"encoding/json"
	"strconv"
)

// MaxIDBytes is the longest string id (after unescaping) that is accepted,
// echoed or used as a progress token.
const MaxIDBytes = 256

// ID is a bounded JSON-RPC request id: a string of at most MaxIDBytes bytes or
// an int64. The zero ID is null: it stands for an absent or unusable id and is
// written as null. IDs are comparable, so they can key maps; 1 and "1" differ.
type ID struct {
	kind idKind
	str  string
	num  int64
}

type idKind uint8

const (
	idNull idKind = iota
	idString
	idInt
)

// StringID returns a string id. The caller keeps it within MaxIDBytes.
func StringID(s string) ID { return ID{kind: idString, str: s} }

// IntID returns an integer id.
func IntID(n int64) ID { return ID{kind: idInt, num: n} }

// IsNull reports whether id is the null id.
func (id ID) IsNull() bool { return id.kind == idNull }

// AppendJSON appends the JSON form of id: a quoted string, a decimal integer,
// or null.
func (id ID) AppendJSON(b []byte) []byte {
	switch id.kind {
	case idString:
		return AppendString(b, id.str)
	case idInt:
		return strconv.AppendInt(b, id.num, 10)
	default:
		return append(b, "null"...)
	}
}

// MarshalJSON implements json.Marshaler.
func (id ID) MarshalJSON() ([]byte, error) { return id.AppendJSON(nil), nil }

// String returns the JSON form of id, for logs.
func (id ID) String() string { return string(id.AppendJSON(nil)) }

// ParseID reads a bounded id from its JSON text. It reports false for
// anything else: null, floats, exponents, booleans, objects, arrays, strings
// over MaxIDBytes and integers outside int64.
func ParseID(raw json.RawMessage) (ID, bool) {
	return parseID(raw)
}

// Kind says what a decoded line is and so what the transport does with it.
type Kind uint8

const (
	// KindBlank is an empty or whitespace-only line: ignored silently.
	KindBlank Kind = iota
	// KindInvalid is a line that is answered with Message.Err and Message.ID.
	KindInvalid
	// KindResponse is a response from the client: it completes a request
	// snodod sent to the client when its ID is one of those outstanding,
	// and is dropped silently otherwise (docs/transport.md §7.1).
	KindResponse
	// KindNotification has a string method and no id: handled inline, never answered.
	KindNotification
	// KindRequest passed every envelope check.
	KindRequest
)

// Message is one classified line (docs/transport.md §4 and §5, rows 1 to 8; the
// in-flight check of row 9 belongs to the connection).
type Message struct {
	Kind Kind
	// ID is the request id for KindRequest, for KindInvalid the id the
	// error line carries (null when it cannot name the request), and for
	// KindResponse the id answered (null when it is not a bounded id).
	ID ID
	// Method is set for KindRequest and KindNotification.
	Method string
	// Params is the raw params object, or nil when absent. It is valid,
	// compact-or-not JSON that passed the strict checks and may be decoded
	// with encoding/json. It aliases the decoded line.
	Params json.RawMessage
	// Split is Params split into members, with _meta's and the era
	// (Modern), for the steps after the decoder.
	Split
	// ProgressToken is the raw value of params._meta.progressToken, or nil
	// when params._meta is not an object or has no such member. It is not
	// validated here (see ParseID).
	ProgressToken json.RawMessage
	// Err is the error to answer for KindInvalid.
	Err *Error
	// Result and ErrorObject are, for KindResponse, the raw result and
	// error members (nil when absent). Like Params they alias the line; see
	// DecodeErrorObject.
	Result, ErrorObject json.RawMessage
}

// Error is a JSON-RPC error object. Data is omitted when nil.
type Error struct {
	Code    int64
	Message string
	Data    any
}

func (e *Error) Error() string {
	return "jsonrpc error " + strconv.FormatInt(e.Code, 10) + ": " + e.Message
}

// JSON-RPC and MCP error codes.
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
	CodeResourceNotFound   = -32002 // legacy eras only
	CodeHeaderMismatch     = -32020 // 2026 only
	CodeMissingCapability  = -32021 // 2026 only
	CodeUnsupportedVersion = -32022 // 2026 only
)

// Errors written by the transport and the executor (docs/transport.md §6). They
// are shared values: never modify them.
var (
	ErrParse              = &Error{Code: CodeParseError, Message: "Parse error"}
	ErrReadFailed         = &Error{Code: CodeParseError, Message: "Failed to read stdio input"}
	ErrReaderPanicked     = &Error{Code: CodeParseError, Message: "Stdio reader terminated unexpectedly"}
	ErrInvalidRequest     = &Error{Code: CodeInvalidRequest, Message: "Invalid Request"}
	ErrNotJSONRPC2        = &Error{Code: CodeInvalidRequest, Message: "Expected a JSON-RPC 2.0 request"}
	ErrIDType             = &Error{Code: CodeInvalidRequest, Message: "Request id must be a string or integer"}
	ErrIDBounds           = &Error{Code: CodeInvalidRequest, Message: "Request id must be a string of at most 256 bytes or an int64 integer"}
	ErrIDSurrogate        = &Error{Code: CodeInvalidRequest, Message: "Request id must not contain a lone UTF-16 surrogate escape"}
	ErrMethodType         = &Error{Code: CodeInvalidRequest, Message: "Request method must be a string"}
	ErrAmbiguous          = &Error{Code: CodeInvalidRequest, Message: "A message with method, result and error is neither a request nor a response"}
	ErrParamsType         = &Error{Code: CodeInvalidParams, Message: "Request params must be an object"}
	ErrDuplicateID        = &Error{Code: CodeInvalidRequest, Message: "Duplicate in-flight request id"}
	ErrCapacity           = &Error{Code: CodeInternalError, Message: "Server execution capacity exhausted"}
	ErrExecutorClosed     = &Error{Code: CodeInternalError, Message: "Request executor unavailable"}
	ErrTimedOut           = &Error{Code: CodeInternalError, Message: "Request execution timed out"}
	ErrWorkerFailed       = &Error{Code: CodeInternalError, Message: "Request worker failed"}
	ErrToolPanicked       = &Error{Code: CodeInternalError, Message: "Tool raised an exception"}
	ErrInvalidResult      = &Error{Code: CodeInternalError, Message: "Server produced an invalid result"}
	ErrProgressToken      = &Error{Code: CodeInvalidParams, Message: "progressToken must be a string of at most 256 bytes or an int64 integer"}
	ErrSubscriptionCap    = &Error{Code: CodeInternalError, Message: "Server subscription capacity exhausted"}
	ErrSubscriptionFailed = &Error{Code: CodeInternalError, Message: "Subscription source failed"}
	ErrSessionClosed      = &Error{Code: CodeInternalError, Message: "Session closed by server"}
)

// LineLimitError is the refusal of a line longer than limit bytes.
func LineLimitError(limit int) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "Message exceeds the " + strconv.Itoa(limit) + "-byte line limit"}
}
