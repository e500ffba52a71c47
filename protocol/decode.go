package protocol

import (
	"bytes"
	"encoding/json"
	"math"
)

// Decode decodes and classifies one line (docs/transport.md §4 and §5, rows 1 to
// 8). line may still end in its LF. What Decode returns aliases line
// (Params, its Split, ProgressToken, Result, ErrorObject): the caller gives
// the line to the message, and must not modify it while the message is in
// use. A transport's lines are its own (the Reader hands each over), so a
// request's params are never copied.
//
// A line that is not exactly one strictly valid JSON value is KindInvalid with
// ErrParse and a null id: invalid JSON or UTF-8, trailing data, a duplicate
// member name at any depth, an integer literal over 64 digits, a number that
// is not a finite float64, or arrays nested in arrays (or objects in objects)
// more than 1,000 deep. The Split and ProgressToken are set only for
// KindRequest and KindNotification.
func Decode(line []byte) Message { return decode(line, false, nil) }

// DecodeInto is Decode with the members of the Split (params', _meta's and
// arguments') stored in members' backing array when it has room for them
// all, so that a caller that keeps the message in a struct of its own
// (the transport's request) can hold them there, in the same allocation;
// without room they get one of their own, as with Decode. The caller owns
// members: it must not use that array for anything else while the
// message is in use.
func DecodeInto(line []byte, members Object) Message { return decode(line, false, members[:0]) }

// DecodeFromServer is Decode in client mode: it judges a line a server sent
// to snodod as its client (a hosted server's stdout, read by mcpclient),
// so that one place judges a line's bytes at both ends of a connection.
// Everything Decode checks is checked, and every line gets the Kind, ID,
// Err, Method, Params, Result and ErrorObject Decode would give it: a
// server's responses, its requests (sampling, elicitation, roots, ping)
// and its notifications. What differs is the split of params, which the
// MCP client reads, not the runtime: Members is set, but params._meta and
// params.arguments are not split (Meta, Arguments and their flags stay
// zero), no era is judged (Modern is false) and no ProgressToken is read.
func DecodeFromServer(line []byte) Message { return decode(line, true, nil) }

// decode is Decode, in client mode when fromServer, the Split's members in
// dst when it has room (DecodeInto).
func decode(line []byte, fromServer bool, dst Object) Message {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if m, ok := decodeFast(line, fromServer, dst); ok {
		return m
	}
	return decodeStrict(line, fromServer, dst)
}

// decodeStrict is decode without the fast path: the reference the fast
// path is checked against (FuzzFastPath). line's LF is already cut.
func decodeStrict(line []byte, fromServer bool, dst Object) Message {
	line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	if isBlank(line) {
		return Message{Kind: KindBlank}
	}
	s := scannerPool.Get().(*scanner)
	defer s.release()
	s.reset(line)
	s.fromServer, s.dst = fromServer, dst
	s.skipSpace()
	v, ok := s.value(roleTop)
	if ok {
		s.skipSpace()
		ok = s.pos == len(line)
	}
	if !ok {
		return Message{Kind: KindInvalid, Err: ErrParse}
	}
	if v.kind != kindObject {
		return Message{Kind: KindInvalid, Err: ErrInvalidRequest}
	}
	m, params := s.classify()
	if params {
		m = s.withParams(m)
	}
	return m
}

// classify applies docs/transport.md §5 rows 1 to 8 to a decoded top-level
// object, and reports whether the message is a request or a notification,
// which then gets its params (withParams).
func (s *scanner) classify() (Message, bool) {
	t := &s.top
	jsonrpc, id, method, params := t[fieldJSONRPC], t[fieldID], t[fieldMethod], t[fieldParams]
	switch {
	case method.kind == kindNone && (t[fieldResult].kind != kindNone || t[fieldError].kind != kindNone):
		return s.response(), false
	case method.kind != kindNone && t[fieldResult].kind != kindNone && t[fieldError].kind != kindNone:
		// JSON-RPC 2.0 §5 forbids result and error together; with a
		// method as well, serving it as a request would guess.
		echo, _ := s.boundedID(id)
		return Message{Kind: KindInvalid, ID: echo, Err: ErrAmbiguous}, false
	case method.kind == kindString && id.kind == kindNone:
		return Message{Kind: KindNotification, Method: s.method(method)}, true
	}
	if jsonrpc.kind != kindString || string(s.unescaped(jsonrpc)) != "2.0" {
		echo, _ := s.boundedID(id)
		return Message{Kind: KindInvalid, ID: echo, Err: ErrNotJSONRPC2}, false
	}
	var echo ID
	if id.kind != kindNone {
		if id.kind != kindString && id.kind != kindInt {
			return Message{Kind: KindInvalid, Err: ErrIDType}, false
		}
		var bad *Error
		if echo, bad = s.checkedID(id); bad != nil {
			return Message{Kind: KindInvalid, Err: bad}, false
		}
	}
	if method.kind != kindString {
		return Message{Kind: KindInvalid, ID: echo, Err: ErrMethodType}, false
	}
	if params.kind != kindNone && params.kind != kindObject {
		return Message{Kind: KindInvalid, ID: echo, Err: ErrParamsType}, false
	}
	return Message{Kind: KindRequest, ID: echo, Method: s.method(method)}, true
}

// withParams gives m its params (when an object) and their Split: the
// members the scan recorded, in one allocation for params, _meta and
// arguments.
func (s *scanner) withParams(m Message) Message {
	p := s.top[fieldParams]
	if p.kind != kindObject {
		return m
	}
	m.Params = s.data[p.start:p.end:p.end]
	np, nm, na := len(s.params), len(s.meta), len(s.args)
	var all Object
	if np+nm+na > 0 {
		all = s.members(np + nm + na)
		copy(all, s.params)
		copy(all[np:], s.meta)
		copy(all[np+nm:], s.args)
	}
	return s.split(m, all, np, nm)
}

// members returns room for n members: in s.dst when it has it
// (DecodeInto), else a new array.
func (s *scanner) members(n int) Object {
	if n <= cap(s.dst) {
		return s.dst[:n]
	}
	return make(Object, n)
}

// split gives m its Split from all, params' np members, then _meta's nm,
// then arguments': nil for none of them.
func (s *scanner) split(m Message, all Object, np, nm int) Message {
	if len(all) > 0 {
		na := len(all) - np - nm
		if np > 0 {
			m.Members = all[:np:np]
		}
		if nm > 0 {
			m.Meta = all[np : np+nm : np+nm]
		}
		if na > 0 {
			m.Arguments = all[np+nm:]
		}
	}
	if s.fromServer {
		return m // params' members only: see DecodeFromServer
	}
	m.MetaObject, m.ArgumentsObject = s.metaObject, s.argsObject
	m.era()
	m.ProgressToken = m.Meta.Value(metaProgressTokenMember)
	return m
}

// response gives what a client response carries: its id, when bounded,
// and its result and error members.
func (s *scanner) response() Message {
	m := Message{Kind: KindResponse}
	m.ID, _ = s.boundedID(s.top[fieldID])
	if r := s.top[fieldResult]; r.kind != kindNone {
		m.Result = s.data[r.start:r.end:r.end]
	}
	if e := s.top[fieldError]; e.kind != kindNone {
		m.ErrorObject = s.data[e.start:e.end:e.end]
	}
	return m
}

// DecodeErrorObject reads a JSON-RPC error object from a client's response:
// an object with an integer code and a string message, and data kept raw
// when present. It reports false for anything else.
func DecodeErrorObject(raw json.RawMessage) (*Error, bool) {
	members, ok := Members(raw)
	if !ok || members == nil {
		return nil, false
	}
	code, ok := parseID(members["code"])
	if !ok || code.kind != idInt {
		return nil, false
	}
	message, ok := String(members["message"])
	if !ok {
		return nil, false
	}
	e := &Error{Code: code.num, Message: message}
	if data, present := members["data"]; present {
		e.Data = data
	}
	return e, true
}

// parseID reads a bounded id from JSON text, whitespace around it allowed.
func parseID(raw json.RawMessage) (ID, bool) {
	s := scanner{data: raw}
	s.skipSpace()
	v, ok := s.value(roleOther)
	if s.skipSpace(); !ok || s.pos != len(raw) {
		return ID{}, false
	}
	return s.boundedID(v)
}

func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// method returns the scanned method string, sharing the text of the methods
// clients send all the time (a switch: no hashing, no allocation).
func (s *scanner) method(v span) string {
	b := s.unescaped(v)
	switch string(b) {
	case "tools/call":
		return "tools/call"
	case "tools/list":
		return "tools/list"
	case "ping":
		return "ping"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/progress":
		return "notifications/progress"
	}
	if m, ok := knownMethods[string(b)]; ok {
		return m
	}
	return string(b)
}

var knownMethods = func() map[string]string {
	m := make(map[string]string)
	for _, name := range requestMethods {
		m[name] = name
	}
	for _, name := range []string{
		"notifications/initialized", "notifications/cancelled",
		"notifications/progress", "notifications/roots/list_changed",
	} {
		m[name] = name
	}
	return m
}()

// boundedID returns the id for the scanned value v when it is a bounded id.
func (s *scanner) boundedID(v span) (ID, bool) {
	id, bad := s.checkedID(v)
	return id, bad == nil
}

// checkedID returns the id for the scanned string or integer v, or the
// error that refuses it: ErrIDBounds for one out of bounds, ErrIDSurrogate
// for a string holding a lone surrogate escape, which unescaping would
// rewrite to U+FFFD: the answer would carry another id, and "\ud800" and
// "\udc00" would be one id (docs/transport.md §5 row 6a).
func (s *scanner) checkedID(v span) (ID, *Error) {
	switch v.kind {
	case kindString:
		// Unescaping shrinks text at most sixfold (\u0041 is "A"), so longer
		// raw text cannot fit: refuse it without unescaping.
		if v.end-v.start-2 > 6*MaxIDBytes {
			return ID{}, ErrIDBounds
		}
		if v.escaped && hasLoneSurrogate(s.data[v.start+1:v.end-1]) {
			return ID{}, ErrIDSurrogate
		}
		if b := s.unescaped(v); len(b) <= MaxIDBytes {
			return StringID(string(b)), nil
		}
	case kindInt:
		if n, ok := parseInt64(s.data[v.start:v.end]); ok {
			return IntID(n), nil
		}
	}
	return ID{}, ErrIDBounds
}

// parseInt64 converts a scanned integer literal, reporting false outside int64.
func parseInt64(b []byte) (int64, bool) {
	negative := b[0] == '-'
	if negative {
		b = b[1:]
	}
	if len(b) > 19 { // no leading zeros: 20 digits is at least 10^19
		return 0, false
	}
	var u uint64
	for _, c := range b {
		u = u*10 + uint64(c-'0')
	}
	if negative {
		return int64(-u), u <= 1<<63
	}
	return int64(u), u <= math.MaxInt64
}
