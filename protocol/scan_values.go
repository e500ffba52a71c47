package protocol

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner's leaf values: strings (validated eight bytes at a time, and
// unescaped) and numbers.

// SWAR constants for scanning eight string bytes at a time.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialBytes marks with its high bit each byte of w (eight string bytes,
// first byte lowest) that needs a closer look: a control byte, a quote, a
// backslash, or a non-ASCII byte. Bytes above the first marked one may be
// marked wrongly (a borrow carries into them); the lowest mark is exact.
func specialBytes(w uint64) uint64 {
	control := (w - 0x20*lows) &^ w
	q := w ^ '"'*lows
	quote := (q - lows) &^ q // a zero byte in q
	b := w ^ '\\'*lows
	backslash := (b - lows) &^ b
	return (control | quote | backslash | w) & highs
}

// str scans the string at s.pos, validating its escapes and its UTF-8, and
// reports whether it holds a backslash.
func (s *scanner) str() (escaped, ok bool) {
	d := s.data
	i := s.pos + 1
	for {
		for i+8 <= len(d) {
			if m := specialBytes(binary.LittleEndian.Uint64(d[i : i+8])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			return false, false
		}
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || hex4(d[i+2:i+6]) < 0 {
					return false, false
				}
				i += 6
			default:
				return false, false
			}
		case c < 0x20:
			return false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return false, false
			}
			i += size
		}
	}
}

// number scans the number at s.pos: kindInt for an integer literal, else
// kindNumber. It refuses integer literals over maxIntegerDigits digits (the
// digits are counted, never converted) and numbers that are not finite
// float64s.
func (s *scanner) number() (valueKind, bool) {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	intStart := s.pos
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if s.digits() == 0 {
		return kindNumber, false
	}
	intDigits := s.pos - intStart
	fraction := s.pos < len(s.data) && s.data[s.pos] == '.'
	if fraction {
		s.pos++
		if s.digits() == 0 {
			return kindNumber, false
		}
	}
	exponent := 0
	hasExponent := s.pos < len(s.data) && (s.data[s.pos]|0x20 == 'e')
	if hasExponent {
		s.pos++
		negative := s.pos < len(s.data) && s.data[s.pos] == '-'
		if negative || s.pos < len(s.data) && s.data[s.pos] == '+' {
			s.pos++
		}
		expStart := s.pos
		if s.digits() == 0 {
			return kindNumber, false
		}
		for _, c := range s.data[expStart:s.pos] {
			if exponent < 1e7 {
				exponent = exponent*10 + int(c-'0')
			}
		}
		if negative {
			exponent = -exponent
		}
	}
	if !fraction && !hasExponent {
		return kindInt, intDigits <= maxIntegerDigits
	}
	// The value is below 10^(intDigits+exponent), and, when its integer part
	// is not 0, at least 10^(intDigits+exponent-1). Only the narrow band in
	// between, or a 0 integer part with a large exponent, needs parsing.
	switch {
	case intDigits+exponent <= 308:
		return kindNumber, true
	case s.data[intStart] != '0' && intDigits+exponent > 309:
		return kindNumber, false
	}
	f, _ := strconv.ParseFloat(string(s.data[start:s.pos]), 64)
	return kindNumber, !math.IsInf(f, 0)
}

// digits consumes decimal digits at s.pos and returns how many.
func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

// hex4 decodes four hex digits, or returns -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendUnescaped appends the unescaped content of a validated JSON string
// (quotes excluded). A surrogate escape that is not half of a valid pair
// becomes U+FFFD, as in encoding/json.
func appendUnescaped(dst, s []byte) []byte {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		switch c := s[1]; c {
		case 'u':
			r := hex4(s[2:6])
			s = s[6:]
			if utf16.IsSurrogate(r) {
				next := rune(-1)
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					next = hex4(s[2:6])
				}
				if r = utf16.DecodeRune(r, next); r != utf8.RuneError {
					s = s[6:]
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		s = s[2:]
	}
	return dst
}

// hasLoneSurrogate reports whether the content of a validated JSON string
// (quotes excluded) holds a \u escape of a surrogate that is not half of
// a valid pair, which appendUnescaped would make U+FFFD.
func hasLoneSurrogate(s []byte) bool {
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return false
		}
		s = s[i:]
		if s[1] != 'u' {
			s = s[2:] // \\ among them: the next backslash starts an escape
			continue
		}
		r := hex4(s[2:6])
		s = s[6:]
		if !utf16.IsSurrogate(r) {
			continue
		}
		next := rune(-1)
		if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
			next = hex4(s[2:6])
		}
		if utf16.DecodeRune(r, next) == utf8.RuneError {
			return true
		}
		s = s[6:]
	}
}

// unescaped returns the content of the scanned string v, unescaped into the
// scanner's scratch buffer when needed; it is valid until the next call.
func (s *scanner) unescaped(v span) []byte {
	content := s.data[v.start+1 : v.end-1]
	if !v.escaped {
		return content
	}
	s.scratch = appendUnescaped(s.scratch[:0], content)
	return s.scratch
}
