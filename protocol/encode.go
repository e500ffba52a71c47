package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The encoder writes frames as docs/transport.md §11.1 fixes them: one compact
// JSON object and "\n"; non-ASCII as raw UTF-8; <, >, & and / unescaped;
// U+2028 and U+2029 as \u2028 and \u2029; control characters escaped;
// invalid UTF-8 replaced by U+FFFD; envelope members in a fixed order.

// AppendResult appends the frame {"jsonrpc":"2.0","id":<id>,"result":<result>}
// and "\n" to dst. When result cannot be encoded (a NaN or infinite number,
// an unsupported type, a failing or panicking json.Marshaler, an invalid
// json.RawMessage) it returns dst unchanged and the error; the caller then
// answers ErrInvalidResult instead.
func AppendResult(dst []byte, id ID, result any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = id.AppendJSON(dst)
	dst = append(dst, `,"result":`...)
	dst, err := AppendValue(dst, result)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, "}\n"...), nil
}

// AppendError appends the frame
// {"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":<message>}}
// and "\n" to dst, with "data" after "message" when e.Data is not nil. Data
// that cannot be encoded is left out.
func AppendError(dst []byte, id ID, e *Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = id.AppendJSON(dst)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, e.Code, 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if e.Data != nil {
		withData, err := AppendValue(append(dst, `,"data":`...), e.Data)
		if err == nil {
			dst = withData
		}
	}
	return append(dst, "}}\n"...)
}

// AppendNotification appends the frame
// {"jsonrpc":"2.0","method":<method>,"params":<params>} and "\n" to dst;
// "params" is left out when params is nil. When params cannot be encoded it
// returns dst unchanged and the error.
func AppendNotification(dst []byte, method string, params any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	return appendMethodParams(dst, start, method, params)
}

// appendMethodParams ends a request or notification frame begun at
// dst[start:]: the method, the params unless nil, and "}\n". When params
// cannot be encoded it returns dst[:start] and the error.
func appendMethodParams(dst []byte, start int, method string, params any) ([]byte, error) {
	dst = AppendString(dst, method)
	if params != nil {
		var err error
		if dst, err = AppendValue(append(dst, `,"params":`...), params); err != nil {
			return dst[:start], err
		}
	}
	return append(dst, "}\n"...), nil
}

// AppendRequest appends the frame
// {"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>} and "\n"
// to dst, for a request snodod sends to its client (docs/protocol.md §3.1);
// "params" is left out when params is nil. When params cannot be encoded it
// returns dst unchanged and the error.
func AppendRequest(dst []byte, id ID, method string, params any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = id.AppendJSON(dst)
	dst = append(dst, `,"method":`...)
	return appendMethodParams(dst, start, method, params)
}

// valueEncoder is a pooled json.Encoder writing straight onto a caller's
// slice, so that a value is copied once from encoding/json's own buffer.
type valueEncoder struct {
	out []byte
	enc *json.Encoder
}

func (v *valueEncoder) Write(p []byte) (int, error) {
	v.out = append(v.out, p...)
	return len(p), nil
}

var encoderPool = sync.Pool{New: func() any {
	v := new(valueEncoder)
	v.enc = json.NewEncoder(v)
	v.enc.SetEscapeHTML(false)
	return v
}}

// Appender is a value that appends its own JSON encoding, to spare a hot
// path the reflection of encoding/json. AppendJSON must append exactly one
// JSON value under the encoder's rules (compact; raw UTF-8; U+2028, U+2029
// and control characters escaped; <, >, & unescaped; invalid UTF-8
// replaced), building strings with AppendString and other values with
// AppendValue, or return an error.
type Appender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// AppendValue appends the compact JSON encoding of value to dst, by its
// AppendJSON when it is an Appender. On error
// the returned slice is dst with nothing appended. A panicking
// json.Marshaler is reported as an error.
func AppendValue(dst []byte, value any) (out []byte, err error) {
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			out, err = dst[:start], fmt.Errorf("protocol: encoding panicked: %v", p)
		}
	}()
	if a, ok := value.(Appender); ok {
		if out, err = a.AppendJSON(dst); err != nil {
			return dst[:start], err
		}
		return out, nil
	}
	v := encoderPool.Get().(*valueEncoder)
	v.out = dst
	err = v.enc.Encode(value) // writes nothing unless it succeeds
	out = v.out
	v.out = nil
	encoderPool.Put(v)
	if err != nil {
		return dst[:start], err
	}
	out = out[:len(out)-1] // Encode ends the value with "\n"
	return sanitize(out, start), nil
}

// sanitize enforces the string rules on b[from:], a valid JSON text, for the
// output of json.Marshaler and json.RawMessage values, which encoding/json
// passes through: raw U+2028 and U+2029 become escapes, and invalid UTF-8
// becomes \ufffd. Both can only occur inside strings, since outside strings
// valid JSON is ASCII.
func sanitize(b []byte, from int) []byte {
	text := b[from:]
	if utf8.Valid(text) && !hasLineSeparator(text) {
		return b
	}
	fixed := make([]byte, 0, len(text)+16)
	last := 0
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRune(text[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fixed = append(append(fixed, text[last:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			fixed = append(append(fixed, text[last:i]...), `\u202`...)
			fixed = append(fixed, hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		last = i
	}
	fixed = append(fixed, text[last:]...)
	return append(b[:from], fixed...)
}

func hasLineSeparator(b []byte) bool {
	for {
		i := bytes.IndexByte(b, 0xE2)
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
			return true
		}
		b = b[i+1:]
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, byte for byte as encoding/json
// with HTML escaping off writes it: ", \ and control characters escaped
// (\b, \f, \n, \r, \t or \u00XX), U+2028 and U+2029 escaped, invalid UTF-8
// as \ufffd, everything else raw.
func AppendString(b []byte, s string) []byte {
	if len(s) > cap(b)-len(b) {
		// One allocation for a long string, with room for a few escapes
		// and the rest of its frame: appending it in pieces would grow the
		// buffer again and again, and a large result would then cost
		// several times its size (the memory goals of docs/bench.md).
		b = slices.Grow(b, len(s)+len(s)/64+512)
	}
	b = append(b, '"')
	last := 0
	for i := 0; i < len(s); {
		if i += plainPrefix(s[i:]); i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[last:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			last = i
			continue
		}
		// plainPrefix stopped at invalid UTF-8, U+2028 or U+2029.
		r, size := utf8.DecodeRuneInString(s[i:])
		b = append(b, s[last:i]...)
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(append(b, `\u202`...), hexDigits[r&0xF])
		}
		i += size
		last = i
	}
	b = append(b, s[last:]...)
	return append(b, '"')
}
