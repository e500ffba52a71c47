package wire

import (
	"bytes"
	"encoding/json"
)

// Kind is what a line from the server is.
type Kind int

const (
	Malformed    Kind = iota // not a JSON object
	Result                   // a response with "result"
	Error                    // a response with "error"
	Notification             // "method" without "id"
	Request                  // "method" with "id": the server asks the client
)

func (k Kind) String() string {
	switch k {
	case Result:
		return "result"
	case Error:
		return "error"
	case Notification:
		return "notification"
	case Request:
		return "request"
	}
	return "malformed"
}

// Frame is one line from the server, classified.
type Frame struct {
	Kind Kind
	// ID is the raw id ("null" for an error about an unreadable line; nil
	// for a notification).
	ID []byte
	// Method is a notification's or request's method.
	Method string
	// Result and Err are the raw values of the members of those names.
	Result, Err []byte
}

// Parse classifies one line (without its newline). The returned frame's
// slices point into line.
func Parse(line []byte) Frame {
	var f Frame
	var method []byte
	ok := Members(line, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			f.ID = v
		case "method":
			method = Unquote(v)
		case "result":
			f.Result = v
		case "error":
			f.Err = v
		}
		return true
	})
	switch {
	case !ok:
		f.Kind = Malformed
	case method != nil && f.ID != nil:
		f.Kind, f.Method = Request, string(method)
	case method != nil:
		f.Kind, f.Method = Notification, string(method)
	case f.Err != nil:
		f.Kind = Error
	case f.Result != nil:
		f.Kind = Result
	default:
		f.Kind = Malformed
	}
	return f
}

// IntID returns the frame's id as an integer, if it is one.
func (f Frame) IntID() (int64, bool) { return Int(f.ID) }

// ErrorCode returns an error frame's code and message.
func (f Frame) ErrorCode() (code int64, message string) {
	code, _ = Int(Member(f.Err, "code"))
	_ = json.Unmarshal(Member(f.Err, "message"), &message)
	return code, message
}

// Modern reports whether a result has the 2026-07-28 shape: a resultType
// of "complete".
func (f Frame) Modern() bool {
	return bytes.Equal(Member(f.Result, "resultType"), []byte(`"complete"`))
}

// Text returns the text of the first content block of a tool result, still
// escaped, or nil.
func (f Frame) Text() []byte {
	content := Member(f.Result, "content")
	if len(content) < 2 || content[0] != '[' {
		return nil
	}
	// The first element of the array: skip '[' and any space.
	first := bytes.TrimLeft(content[1:], " \t\r\n")
	end := valueEnd(first, 0)
	if end < 0 {
		return nil
	}
	return Unquote(Member(first[:end], "text"))
}

// IsError reports whether a tool result has isError set.
func (f Frame) IsError() bool {
	return bytes.Equal(Member(f.Result, "isError"), []byte("true"))
}
