package protocol

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The scanner: one validating pass over the line.

// Fixed decoding limits (docs/transport.md §4 and §15).
const (
	// maxIntegerDigits bounds an integer literal (no fraction, no exponent),
	// sign not counted. Digits are counted while scanning, so a longer literal
	// is refused without ever being converted.
	maxIntegerDigits = 64
	// maxNesting bounds how deeply arrays nest in arrays, and objects in
	// objects. The two are counted separately: docs/transport.md §16 case 17 serves
	// 1,000 nested arrays inside params.arguments, which already sits three
	// objects deep, and refuses 1,001.
	maxNesting = 1000
	// linearNames is the member count up to which an object's names are
	// checked for duplicates by a linear scan; larger objects switch to a map
	// so that a 100,000-member object is not quadratic.
	linearNames = 16
)

// valueKind is the JSON type of a scanned value; kindInt is an integer
// literal (no fraction, no exponent), kindNumber any other number.
type valueKind uint8

const (
	kindNone valueKind = iota
	kindObject
	kindArray
	kindString
	kindInt
	kindNumber
	kindLiteral // true, false, null
)

// span locates one scanned value in the scanned text, quotes included.
type span struct {
	kind       valueKind
	escaped    bool // a string holding a backslash
	start, end int
}

// role says which members of an object the scanner records in scanner.top.
type role uint8

const (
	roleOther  role = iota
	roleTop         // the line's value: the envelope members
	roleParams      // the top-level params object: each member, _meta and arguments
	roleMeta        // params._meta: each member
	roleArgs        // params.arguments: each member
)

// Recorded members, indexes into scanner.top.
const (
	fieldJSONRPC = iota
	fieldID
	fieldMethod
	fieldParams
	fieldResult
	fieldError
	fieldCount
	fieldNone = -1
)

// member says where to record a member named name of an object scanned in
// role r (a field or fieldNone), and the role of its value.
func member(r role, name []byte) (int, role) {
	switch {
	case r == roleTop:
		switch string(name) {
		case "jsonrpc":
			return fieldJSONRPC, roleOther
		case "id":
			return fieldID, roleOther
		case "method":
			return fieldMethod, roleOther
		case "params":
			return fieldParams, roleParams
		case "result":
			return fieldResult, roleOther
		case "error":
			return fieldError, roleOther
		}
	case r == roleParams:
		switch string(name) {
		case "_meta":
			return fieldNone, roleMeta
		case "arguments":
			return fieldNone, roleArgs
		}
	}
	return fieldNone, roleOther
}

// nameRef locates a member name: in the scanned text when it held no escape,
// else unescaped in the scanner's arena.
type nameRef struct {
	start, end int
	inArena    bool
	key        uint64 // nameKey, once add has it
}

// nameKey is a cheap key of a member name: its length and its first six
// bytes (fewer when shorter). Equal names have equal keys. name is in buf,
// which usually holds eight bytes from its start (a name is followed by at
// least its quote and a colon): one load then.
func nameKey(buf, name []byte, start int) uint64 {
	n := min(len(name), 6)
	k := uint64(len(name)) << 48
	if start >= 0 && start+8 <= len(buf) {
		return k | binary.LittleEndian.Uint64(buf[start:start+8])&(1<<(8*n)-1)
	}
	for i := range n {
		k |= uint64(name[i]) << (8 * i)
	}
	return k
}

// scanner is a single-pass validating JSON scanner over one line. Its stacks
// are reused between lines through scannerPool.
type scanner struct {
	data    []byte
	pos     int
	arrays  int       // open arrays
	objects int       // open objects
	names   []nameRef // names of the open objects still compared linearly
	arena   []byte    // their unescaped names
	scratch []byte
	top     [fieldCount]span
	// The members of params, of params._meta and of params.arguments, as
	// Decode hands them down (Split); the flags report that _meta and
	// arguments are objects.
	params, meta, args []Member
	metaObject         bool
	argsObject         bool
}

var scannerPool = sync.Pool{New: func() any { return new(scanner) }}

func (s *scanner) reset(data []byte) {
	*s = scanner{data: data, names: s.names[:0], arena: s.arena[:0], scratch: s.scratch[:0],
		params: s.params[:0], meta: s.meta[:0], args: s.args[:0]}
}

// release returns s to the pool unless a huge line made its buffers huge.
// The members recorded are dropped first: they alias the line.
func (s *scanner) release() {
	if cap(s.arena) > 1<<20 || cap(s.scratch) > 1<<20 || cap(s.names) > 1<<16 ||
		cap(s.params) > 1<<10 || cap(s.meta) > 1<<10 || cap(s.args) > 1<<10 {
		return
	}
	clear(s.params)
	clear(s.meta)
	clear(s.args)
	s.data = nil
	scannerPool.Put(s)
}

// space skips whitespace at s.pos. Compact JSON has none, so its test is
// one comparison, inlined: bytes above ' ' are never whitespace.
func (s *scanner) space() {
	if s.pos < len(s.data) && s.data[s.pos] <= ' ' {
		s.skipSpace()
	}
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// value scans the value at s.pos (whitespace already skipped). r says what
// to record if the value is an object.
func (s *scanner) value(r role) (span, bool) {
	if s.pos >= len(s.data) {
		return span{}, false
	}
	v := span{start: s.pos}
	ok := false
	switch c := s.data[s.pos]; {
	case c == '{':
		v.kind, ok = kindObject, s.object(r)
	case c == '[':
		v.kind, ok = kindArray, s.array()
	case c == '"':
		v.kind = kindString
		v.escaped, ok = s.str()
	case c == '-' || c >= '0' && c <= '9':
		v.kind, ok = s.number()
	case c == 't':
		v.kind, ok = kindLiteral, s.literal("true")
	case c == 'f':
		v.kind, ok = kindLiteral, s.literal("false")
	case c == 'n':
		v.kind, ok = kindLiteral, s.literal("null")
	}
	v.end = s.pos
	return v, ok
}

func (s *scanner) literal(word string) bool {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return false
	}
	s.pos += len(word)
	return true
}

// open consumes the opening bracket at s.pos and reports whether the
// container is empty (closed at once).
func (s *scanner) open(close byte) bool {
	s.pos++
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == close {
		s.pos++
		return true
	}
	return false
}

// next consumes what follows a container element: a comma (then more
// elements follow) or the closing bracket.
func (s *scanner) next(close byte) (more, ok bool) {
	s.space()
	if s.pos >= len(s.data) {
		return false, false
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		s.space()
		return true, true
	case close:
		s.pos++
		return false, true
	}
	return false, false
}

func (s *scanner) array() bool {
	if s.arrays++; s.arrays > maxNesting {
		return false
	}
	more := !s.open(']')
	for more {
		if _, ok := s.value(roleOther); !ok {
			return false
		}
		var ok bool
		if more, ok = s.next(']'); !ok {
			return false
		}
	}
	s.arrays--
	return true
}

// object scans an object, recording members as role r asks, and refuses
// duplicate names.
func (s *scanner) object(r role) bool {
	if s.objects++; s.objects > maxNesting {
		return false
	}
	names := nameSet{namesStart: len(s.names), arenaStart: len(s.arena)}
	more := !s.open('}')
	for more {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		nameStart := s.pos + 1
		escaped, ok := s.str()
		if !ok {
			return false
		}
		ref := nameRef{start: nameStart, end: s.pos - 1}
		if escaped {
			ref = nameRef{start: len(s.arena), inArena: true}
			s.arena = appendUnescaped(s.arena, s.data[nameStart:s.pos-1])
			ref.end = len(s.arena)
		}
		name := s.name(ref)
		field, child := fieldNone, roleOther
		if r != roleOther {
			field, child = member(r, name)
		}
		if !s.add(&names, ref, name) {
			return false
		}
		if s.pos < len(s.data) && s.data[s.pos] == ':' {
			s.pos++ // compact JSON
		} else {
			s.skipSpace()
			if s.pos >= len(s.data) || s.data[s.pos] != ':' {
				return false
			}
			s.pos++
		}
		s.space()
		v, ok := s.value(child)
		if !ok {
			return false
		}
		if field != fieldNone {
			s.top[field] = v
		}
		if r >= roleParams {
			s.record(r, ref, v)
		}
		if more, ok = s.next('}'); !ok {
			return false
		}
	}
	s.names, s.arena = s.names[:names.namesStart], s.arena[:names.arenaStart]
	s.objects--
	return true
}

// record keeps a member of params (r is roleParams), of params._meta
// (roleMeta) or of params.arguments (roleArgs) for Split. Its name aliases
// the line unless it held escapes: the arena is reused once its object
// ends.
func (s *scanner) record(r role, ref nameRef, v span) {
	var name string
	switch {
	case ref.inArena:
		name = string(s.arena[ref.start:ref.end])
	case ref.end > ref.start:
		name = unsafe.String(&s.data[ref.start], ref.end-ref.start)
	}
	m := Member{Name: name, Value: s.data[v.start:v.end:v.end]}
	switch r {
	case roleMeta:
		s.meta = append(s.meta, m)
		return
	case roleArgs:
		s.args = append(s.args, m)
		return
	}
	s.params = append(s.params, m)
	if v.kind == kindObject {
		switch name {
		case "_meta":
			s.metaObject = true
		case "arguments":
			s.argsObject = true
		}
	}
}

// nameSet holds the member names of one open object, for duplicate
// detection. Up to linearNames names live on the scanner's shared stacks
// (s.names from namesStart, unescaped ones in s.arena from arenaStart) and
// are compared linearly; past that they move to a map so that a
// 100,000-member object is not quadratic.
type nameSet struct {
	namesStart, arenaStart int
	set                    map[string]struct{}
	// seen has a bit set for each name's key (by nameKey): a name whose
	// bit is clear is new without comparing it to the others.
	seen uint64
}

// add records the name ref (the last one scanned, so the last in the arena
// if there; name is its text) and reports false if the object already had
// it. Names are compared by a key of their length and first bytes first.
func (s *scanner) add(n *nameSet, ref nameRef, name []byte) bool {
	if n.set != nil {
		if _, dup := n.set[string(name)]; dup {
			return false
		}
		n.set[string(name)] = struct{}{}
		s.arena = s.arena[:n.arenaStart]
		return true
	}
	if ref.inArena {
		ref.key = nameKey(nil, name, -1)
	} else {
		ref.key = nameKey(s.data, name, ref.start)
	}
	bit := uint64(1) << ((ref.key * 0x9E3779B97F4A7C15) >> 58)
	if n.seen&bit != 0 {
		for _, other := range s.names[n.namesStart:] {
			if other.key == ref.key && bytes.Equal(s.name(other), name) {
				return false
			}
		}
	}
	n.seen |= bit
	if s.names = append(s.names, ref); len(s.names)-n.namesStart > linearNames {
		n.set = make(map[string]struct{}, 4*linearNames)
		for _, other := range s.names[n.namesStart:] {
			n.set[string(s.name(other))] = struct{}{}
		}
		s.names, s.arena = s.names[:n.namesStart], s.arena[:n.arenaStart]
	}
	return true
}

func (s *scanner) name(ref nameRef) []byte {
	if ref.inArena {
		return s.arena[ref.start:ref.end]
	}
	return s.data[ref.start:ref.end]
}

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
