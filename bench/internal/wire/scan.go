// Package wire is the little JSON the harness needs, written by hand: a
// scanner that walks the members of a JSON object without decoding them,
// and the request lines the load generator sends. Both the load generator
// and the raw floor (peers/raw) use the scanner, so neither pays for
// reflection or validation.
//
// The scanner trusts its input to be JSON: it finds where values begin and
// end, and reports malformed input only where that is free to notice.
package wire

import "bytes"

// Members calls fn with the key (still escaped, without its quotes) and the
// raw value of each member of the JSON object in b, in order, until fn
// returns false. It reports whether b held a well-formed object as far as
// it walked.
func Members(b []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		end := stringEnd(b, i)
		if end < 0 {
			return false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vend := valueEnd(b, i)
		if vend < 0 {
			return false
		}
		if !fn(key, b[i:vend]) {
			return true
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return false
		}
	}
	return false
}

// Member returns the raw value of the member key of the object in b, or nil.
func Member(b []byte, key string) []byte {
	var v []byte
	Members(b, func(k, value []byte) bool {
		if string(k) == key {
			v = value
			return false
		}
		return true
	})
	return v
}

// Path follows keys through nested objects and returns the raw value at
// the end, or nil.
func Path(b []byte, keys ...string) []byte {
	for _, k := range keys {
		b = Member(b, k)
		if b == nil {
			return nil
		}
	}
	return b
}

// Unquote returns the contents of a JSON string value without its quotes,
// still escaped, or nil when v is not a string.
func Unquote(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil
	}
	return v[1 : len(v)-1]
}

// Int parses a JSON integer value. ok is false for anything else
// (fractions, exponents, strings).
func Int(v []byte) (n int64, ok bool) {
	if len(v) == 0 {
		return 0, false
	}
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string that starts at b[i]
// (a quote), or -1.
func stringEnd(b []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := q - 1; j >= i && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// valueEnd returns the index just past the value that starts at b[i], or -1.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				if j == i {
					return -1
				}
				return j
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
