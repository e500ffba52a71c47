package protocol

import (
	"sync"
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
	// fromServer: DecodeFromServer's scan, which splits params into
	// members but neither _meta nor arguments.
	fromServer bool
	// dst is where the Split's members go when it has room (DecodeInto).
	dst Object
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
	s.data, s.dst = nil, nil
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
			if s.fromServer && child != roleOther && r == roleParams {
				child = roleOther
			}
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
