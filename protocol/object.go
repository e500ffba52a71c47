package protocol

import (
	"bytes"
	"encoding/json"
	"unsafe"
)

// Member is one member of a JSON object, as the decoder or SplitObject
// found it.
type Member struct {
	Name  string
	Value json.RawMessage
}

// Object is a JSON object split into its members, in the order they were
// sent. It is what the decoder hands down instead of the text, so that no
// later step splits the same object again (docs/architecture.md §4.5). Names
// and values alias the text they were split from, which must not be modified
// while the Object is in use. An object that passed the strict decoder has
// no two members of the same name; on other text Get finds the first.
//
// Lookups are linear: the objects of a request are small, and the runtime
// asks each for a handful of names, so a scan costs less than building a
// map (which was a third of a call's allocations).
type Object []Member

// Get returns the value of the member name, and whether it is present.
func (o Object) Get(name string) (json.RawMessage, bool) {
	for i := range o {
		if o[i].Name == name {
			return o[i].Value, true
		}
	}
	return nil, false
}

// Value returns the value of the member name, or nil when it is absent,
// as indexing a map of members would.
func (o Object) Value(name string) json.RawMessage {
	v, _ := o.Get(name)
	return v
}

// Has reports whether the member name is present.
func (o Object) Has(name string) bool {
	_, ok := o.Get(name)
	return ok
}

// Map returns the members as a map, for callers that want one.
func (o Object) Map() map[string]json.RawMessage {
	if len(o) == 0 {
		return nil
	}
	m := make(map[string]json.RawMessage, len(o))
	for _, mb := range o {
		m[mb.Name] = mb.Value
	}
	return m
}

// SplitObject splits a JSON object into its members, appended to dst
// (which may be nil) so that a caller may split into a buffer it reuses.
// Values, and names without escapes, alias raw. It reports false for
// absent (nil) raw, null and every other value, and for text that is not
// one well-formed object. It is meant for values that already passed the
// strict decoder, where it is a cheap, reflection-free split; on other
// input it is still safe, but it checks only the object's outline, not
// each value in full.
func SplitObject(dst Object, raw json.RawMessage) (Object, bool) {
	start, bad := len(dst), false
	if !EachMember(raw, func(name, value json.RawMessage) bool {
		var s string
		if bytes.IndexByte(name, '\\') >= 0 {
			var ok bool
			if s, ok = unquote(name); !ok {
				bad = true
				return false
			}
		} else if len(name) > 2 {
			// Aliasing spares an allocation per member on every request.
			s = unsafe.String(&name[1], len(name)-2)
		}
		dst = append(dst, Member{Name: s, Value: value})
		return true
	}) || bad {
		return dst[:start], false
	}
	return dst, true
}

// Split is what the decoder found in a message's params, handed down so
// that no later step splits them again: the members of params, those of
// params._meta and of params.arguments (a tool's or a prompt's), and the
// era the request belongs to (docs/protocol.md §1.2).
// Message embeds it; a caller holding only the params text gets one from
// SplitParams.
type Split struct {
	// Members are params' members in order; nil when params is absent or
	// {}.
	Members Object
	// Meta are params._meta's members when it is an object; nil
	// otherwise.
	Meta Object
	// MetaObject reports that params._meta is an object.
	MetaObject bool
	// Arguments are params.arguments' members when it is an object; nil
	// otherwise. ArgumentsObject reports that it is an object.
	Arguments       Object
	ArgumentsObject bool
	// Modern reports that params._meta is an object holding the member
	// "io.modelcontextprotocol/protocolVersion" (whatever its value): the
	// request belongs to the 2026 era (docs/protocol.md §1.2).
	Modern bool
}

// SplitParams splits a request's params object (nil when absent) as the
// decoder does. It reports false when params is present and not an
// object.
func SplitParams(params json.RawMessage) (Split, bool) {
	var s Split
	if params == nil {
		return s, true
	}
	var ok bool
	if s.Members, ok = SplitObject(nil, params); !ok {
		return Split{}, false
	}
	if raw, present := s.Members.Get("_meta"); present {
		s.Meta, s.MetaObject = SplitObject(nil, raw)
	}
	if raw, present := s.Members.Get("arguments"); present {
		s.Arguments, s.ArgumentsObject = SplitObject(nil, raw)
	}
	s.era()
	return s, true
}

// era applies the era rule of docs/protocol.md §1.2, the one place it is
// stated: a request is 2026's when its _meta is an object holding the
// protocol version member.
func (s *Split) era() {
	s.Modern = s.MetaObject && s.Meta.Has(MetaProtocolVersion)
}
