package protocol

import (
	"encoding/json"
	"unicode/utf8"
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
//
// The hot path uses SplitObject, which builds no map; Members is that split
// as a map, for callers that look members up by the dozen.
func Members(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var buf [8]Member
	o, ok := SplitObject(buf[:0], raw)
	if !ok {
		return nil, false
	}
	return o.Map(), true
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
