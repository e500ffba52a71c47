package protocol

import (
	"bytes"
	"math"
	"unsafe"
)

// The fast path: a scan of compact lines that records what the strict scan
// records, with all its state on the stack (docs/architecture.md §4.6).
//
// It only ever accepts. A line it is not sure of (any whitespace outside a
// string, a name with an escape, an object with more members, or values
// nested deeper, than its fixed arrays hold, or anything the strict scan
// would refuse) makes it give up, and the strict decoder judges the line
// from its first byte: every refusal, and so every error's text, is the
// strict decoder's. What it accepts it accepts with the strict scan's own
// leaf scanners (str, number) and classifies with the same classify, so
// that a Message from either is the same; FuzzFastPath checks that on
// every input.
//
// Its duplicate check is why it is fast: an object's names (a few, none
// escaped) are compared where they lie in the line, in a fixed array on
// the stack, so no name is copied and no pooled stack is written (a write
// to the heap pays the garbage collector's write barrier while it runs).

// The fast path's bounds: a line past them goes to the strict decoder.
const (
	// fastDepth bounds how deeply arrays and objects nest, together.
	fastDepth = 32
	// fastNames bounds the names of the open objects, together.
	fastNames = 32
	// fastRecorded bounds the recorded members of params, of params._meta
	// and of params.arguments, each.
	fastRecorded = 16
)

// fastName is a member name of an open object: its nameKey and where it
// lies in the line.
type fastName struct {
	key        uint64
	start, end int32
}

// fastMember is a recorded member: where its name and its value lie.
type fastMember struct {
	nameStart, nameEnd   int32
	valueStart, valueEnd int32
}

// fastScanner is the fast path's state. It embeds a scanner for its data,
// position, envelope members and leaf scanners, and keeps the rest in
// fixed arrays; it lives on its caller's stack and is never pooled.
type fastScanner struct {
	scanner
	depth              int
	nnames             int
	names              [fastNames]fastName
	np, nm, na         int
	params, meta, args [fastRecorded]fastMember
}

// decodeFast decodes line (its LF already cut) as decode would, and
// reports false when the line is not one it takes (see above): the caller
// then decodes it strictly.
func decodeFast(line []byte, fromServer bool, dst Object) (Message, bool) {
	if len(line) == 0 || line[0] != '{' || len(line) > math.MaxInt32 {
		return Message{}, false
	}
	var f fastScanner
	f.data, f.fromServer, f.dst = line, fromServer, dst
	if !f.object(roleTop) || f.pos != len(line) {
		return Message{}, false
	}
	m, params := f.classify()
	if params {
		m = f.withParams(m)
	}
	return m, true
}

// value scans the value at f.pos, as scanner.value does.
func (f *fastScanner) value(r role) (span, bool) {
	d := f.data
	if f.pos >= len(d) {
		return span{}, false
	}
	v := span{start: f.pos}
	ok := false
	switch c := d[f.pos]; {
	case c == '"':
		v.kind = kindString
		v.escaped, ok = f.str()
	case c == '{':
		v.kind, ok = kindObject, f.object(r)
	case c == '[':
		v.kind, ok = kindArray, f.array()
	case c == '-' || c >= '0' && c <= '9':
		v.kind, ok = f.number()
	case c == 't':
		v.kind, ok = kindLiteral, f.literal("true")
	case c == 'f':
		v.kind, ok = kindLiteral, f.literal("false")
	case c == 'n':
		v.kind, ok = kindLiteral, f.literal("null")
	}
	v.end = f.pos
	return v, ok
}

func (f *fastScanner) array() bool {
	if f.depth++; f.depth > fastDepth {
		return false
	}
	d := f.data
	f.pos++
	if f.pos < len(d) && d[f.pos] == ']' {
		f.pos++
		f.depth--
		return true
	}
	for {
		if _, ok := f.value(roleOther); !ok || f.pos >= len(d) {
			return false
		}
		switch d[f.pos] {
		case ',':
			f.pos++
			continue
		case ']':
			f.pos++
			f.depth--
			return true
		}
		return false
	}
}

// object scans an object in role r, as scanner.object does, giving up on
// a name it cannot compare in place and on a possible duplicate.
func (f *fastScanner) object(r role) bool {
	if f.depth++; f.depth > fastDepth {
		return false
	}
	d := f.data
	f.pos++
	if f.pos < len(d) && d[f.pos] == '}' {
		f.pos++
		f.depth--
		return true
	}
	first := f.nnames
	var seen uint64 // a bit per name's key, as in nameSet
	for {
		if f.pos >= len(d) || d[f.pos] != '"' {
			return false
		}
		start := f.pos + 1
		if escaped, ok := f.str(); !ok || escaped {
			return false
		}
		end := f.pos - 1
		if f.pos >= len(d) || d[f.pos] != ':' || f.nnames == fastNames {
			return false
		}
		f.pos++
		name := d[start:end]
		key := nameKey(d, name, start)
		if bit := uint64(1) << ((key * 0x9E3779B97F4A7C15) >> 58); seen&bit == 0 {
			seen |= bit
		} else {
			for _, other := range f.names[first:f.nnames] {
				if other.key == key && bytes.Equal(d[other.start:other.end], name) {
					return false // a duplicate: the strict decoder refuses it
				}
			}
		}
		f.names[f.nnames] = fastName{key: key, start: int32(start), end: int32(end)}
		f.nnames++
		field, child := fieldNone, roleOther
		if r != roleOther {
			field, child = member(r, name)
			if f.fromServer && child != roleOther && r == roleParams {
				child = roleOther
			}
		}
		v, ok := f.value(child)
		if !ok {
			return false
		}
		if field != fieldNone {
			f.top[field] = v
		}
		if r >= roleParams && !f.record(r, start, end, v) {
			return false
		}
		if f.pos >= len(d) {
			return false
		}
		switch d[f.pos] {
		case ',':
			f.pos++
			continue
		case '}':
			f.pos++
			f.nnames = first
			f.depth--
			return true
		}
		return false
	}
}

// record keeps a member of params, params._meta or params.arguments (r
// says which), as scanner.record does, reporting false when its array is
// full.
func (f *fastScanner) record(r role, nameStart, nameEnd int, v span) bool {
	m := fastMember{nameStart: int32(nameStart), nameEnd: int32(nameEnd), valueStart: int32(v.start), valueEnd: int32(v.end)}
	switch r {
	case roleMeta:
		if f.nm == fastRecorded {
			return false
		}
		f.meta[f.nm] = m
		f.nm++
		return true
	case roleArgs:
		if f.na == fastRecorded {
			return false
		}
		f.args[f.na] = m
		f.na++
		return true
	}
	if f.np == fastRecorded {
		return false
	}
	f.params[f.np] = m
	f.np++
	if v.kind == kindObject {
		switch string(f.data[nameStart:nameEnd]) {
		case "_meta":
			f.metaObject = true
		case "arguments":
			f.argsObject = true
		}
	}
	return true
}

// withParams is scanner.withParams over the fast path's arrays.
func (f *fastScanner) withParams(m Message) Message {
	p := f.top[fieldParams]
	if p.kind != kindObject {
		return m
	}
	m.Params = f.data[p.start:p.end:p.end]
	np, nm, na := f.np, f.nm, f.na
	var all Object
	if np+nm+na > 0 {
		all = f.scanner.members(np + nm + na)
		f.fill(all, f.params[:np])
		f.fill(all[np:], f.meta[:nm])
		f.fill(all[np+nm:], f.args[:na])
	}
	return f.split(m, all, np, nm)
}

// fill fills dst with the members recorded in src.
func (f *fastScanner) fill(dst Object, src []fastMember) {
	for i, r := range src {
		if r.nameEnd > r.nameStart {
			dst[i].Name = unsafe.String(&f.data[r.nameStart], r.nameEnd-r.nameStart)
		}
		dst[i].Value = f.data[r.valueStart:r.valueEnd:r.valueEnd]
	}
}
