package protocol

import (
	"bytes"
	"encoding/json"
)

// EachMember calls f with each member of the JSON object raw, in order:
// its name's raw text (quotes and escapes included, as written) and its
// value, both aliasing raw. It stops when f returns false. It reports
// false for anything but one well-formed object, as Members does, checking
// the object's outline only. It allocates nothing: relays splice objects
// with it (add, drop or replace members) without decoding their values.
func EachMember(raw json.RawMessage, f func(name, value json.RawMessage) bool) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return false
		}
		end, _ := stringEnd(raw, i)
		if end < 0 {
			return false
		}
		name := raw[i:end:end]
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		start := skipSpace(raw, i+1)
		vend := valueEnd(raw, start)
		if vend < 0 {
			return false
		}
		if !f(name, raw[start:vend:vend]) {
			return true
		}
		i = skipSpace(raw, vend)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return skipSpace(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

// SetMember returns a copy of the object obj (nil: {}) without its member
// name, and with name set to value at the end when value is not nil (a
// value already encoded). A member whose name is written with escapes is
// not recognised, and stays; obj that is not an object is replaced whole.
func SetMember(obj json.RawMessage, name string, value json.RawMessage) json.RawMessage {
	quoted := AppendString(nil, name)
	out := make([]byte, 0, len(obj)+len(quoted)+len(value)+2)
	if obj != nil && !EachMember(obj, func(n, v json.RawMessage) bool {
		if !bytes.Equal(n, quoted) {
			out = AppendMember(out, n, v)
		}
		return true
	}) {
		out = out[:0]
	}
	if value != nil {
		out = AppendMember(out, quoted, value)
	}
	if len(out) == 0 {
		return json.RawMessage("{}")
	}
	out[0] = '{'
	return append(out, '}')
}

// AppendMember appends ,"name":value to dst: name is the member's name
// already quoted (as EachMember gives it), value its value already
// encoded. A splice of an object appends each member so, then turns the
// first comma into the opening brace and appends the closing one, as
// SetMember does.
func AppendMember(dst, name, value []byte) []byte {
	dst = append(dst, ',')
	dst = append(dst, name...)
	dst = append(dst, ':')
	return append(dst, value...)
}
