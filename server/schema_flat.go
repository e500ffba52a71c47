package server

import (
	"encoding/json"

	"github.com/snodod/snodod/protocol"
)

// flatSchema is the common shape of a tool's input schema, checked without
// decoding the arguments: an object whose properties are each a string,
// integer, number or boolean (with annotations only), some required, extra
// members allowed or not. Typed tools with plain struct arguments get this
// shape from their Go types.
type flatSchema struct {
	// props are the properties and their JSON Schema types, looked up
	// linearly: a tool has a handful.
	props  []flatProp
	closed bool // additionalProperties: false
}

type flatProp struct{ name, kind string }

func (f *flatSchema) kind(name string) (string, bool) {
	for _, p := range f.props {
		if p.name == name {
			return p.kind, true
		}
	}
	return "", false
}

// compileFlat returns the flat form of a schema document, or nil when it
// says anything the flat check does not cover.
func compileFlat(doc map[string]any) *flatSchema {
	f := &flatSchema{}
	for k, v := range doc {
		switch k {
		case "type":
			if v != "object" {
				return nil
			}
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			for name, p := range props {
				pm, ok := p.(map[string]any)
				if !ok || !onlyAnnotations(pm) {
					return nil
				}
				switch t := pm["type"]; t {
				case "string", "integer", "number", "boolean":
					f.props = append(f.props, flatProp{name, t.(string)})
				default:
					return nil
				}
			}
		case "required":
			// Checked by validateArguments itself.
		case "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			f.closed = !b
		case "$schema", "$id", "$comment", "title", "description", "examples", "deprecated":
		default:
			return nil
		}
	}
	return f
}

// valid reports whether args certainly satisfy the schema (required
// members are checked by the caller). false means "not certain": the full
// validator then decides, and words the failure.
func (f *flatSchema) valid(args protocol.Object) bool {
	for _, m := range args {
		name, raw := m.Name, m.Value
		kind, known := f.kind(name)
		if !known {
			if f.closed {
				return false
			}
			continue
		}
		if len(raw) == 0 {
			return false
		}
		switch c := raw[0]; kind {
		case "string":
			if c != '"' {
				return false
			}
		case "boolean":
			if c != 't' && c != 'f' {
				return false
			}
		case "number", "integer":
			if c != '-' && (c < '0' || c > '9') {
				return false
			}
			if kind == "integer" && !plainInteger(raw) {
				return false // 5.0 and 1e2 are integers too: let the validator judge
			}
		}
	}
	return true
}

func plainInteger(raw []byte) bool {
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// validFlat is the fast path of validateArguments: "", true when the
// arguments are valid or miss required members (with the message), or
// false when the full validator must decide. members are the arguments'
// members when have is set; otherwise it splits them when it needs them,
// and returns them (ok) when it did.
func (s *schema) validFlat(args json.RawMessage, members protocol.Object, have bool) (_ protocol.Object, ok bool, msg string, sure bool) {
	if s.flat == nil {
		return members, have, "", false
	}
	if !have {
		if members, have = protocol.SplitObject(nil, args); !have {
			return nil, false, "", false
		}
	}
	if msg := missingRequired(s.required, members.Has); msg != "" {
		return members, true, msg, true
	}
	return members, true, "", s.flat.valid(members)
}
