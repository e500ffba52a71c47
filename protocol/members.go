package protocol

import (
	"encoding/json"
	"unicode/utf8"
	"unsafe"
)

// Members splits a JSON object into its members; the values, and names
// without escapes, alias raw, which must not be modified while they are in
// use (a request's params never are). An empty object gives a nil map,
// which reads as an empty one.
// It reports false for absent (nil) raw, null and every other value, and
// for text that is not one well-formed object. It is meant for values that
// already passed the strict decoder (a request's params), where it is a
// cheap, reflection-free split; on other input it is still safe, but it
// checks only the object's outline, not each value in full.
func Members(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage // made at the first member: {} costs nothing
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return m, skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return nil, false
		}
		end, escaped := stringEnd(raw, i)
		if end < 0 {
			return nil, false
		}
		var name string
		if escaped {
			var ok bool
			if name, ok = unquote(raw[i:end]); !ok {
				return nil, false
			}
		} else if end-i > 2 {
			// Aliasing spares an allocation per member on every request.
			name = unsafe.String(&raw[i+1], end-i-2)
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		start := skipSpace(raw, i+1)
		vend := valueEnd(raw, start)
		if vend < 0 {
			return nil, false
		}
		if m == nil {
			m = make(map[string]json.RawMessage, 4)
		}
		m[name] = raw[start:vend:vend]
		i = skipSpace(raw, vend)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return m, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] (a
// quote), and whether it holds escapes; -1 when it does not end.
func stringEnd(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, false
}

// valueEnd returns the index just past the value starting at b[i], or -1.
// Strings are skipped whole, so brackets inside them do not count.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				break
			}
			if c >= utf8.RuneSelf || c == '"' || c == '{' || c == '[' || c == ':' {
				return -1
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// unquote decodes a JSON string with escapes. It is apart from Members
// because the variable it decodes into escapes to the heap: inline, it
// cost an allocation for every member name, escaped or not.
func unquote(quoted []byte) (string, bool) {
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err == nil
}
