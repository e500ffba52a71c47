package server

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/snodod/snodod/protocol"
)

// flatArgs decodes a tool's arguments into a flat struct (exported fields of
// string, bool, integer or float64 kind, named by plain json tags) straight
// from the arguments' members, without encoding/json: for such a struct
// reflection and the second pass over the text were most of a tool call's
// decoding (docs/architecture.md §4.5). It covers only the values it decodes
// exactly as encoding/json would, and reports false for anything else (a
// name that does not match a field exactly, null, a number that is not a
// plain integer for an integer field, a value of another kind): the caller
// then decodes with encoding/json, which has the final word on those.
type flatArgs struct {
	fields []flatField
}

type flatField struct {
	name   string
	kind   reflect.Kind
	offset uintptr
}

// newFlatArgs returns the decoder of t, or nil when t is not a flat struct.
func newFlatArgs(t reflect.Type) *flatArgs {
	if t.Kind() != reflect.Struct {
		return nil
	}
	d := &flatArgs{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			return nil
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, opts, _ := strings.Cut(tag, ",")
			if n == "-" && opts == "" || strings.Contains(","+opts+",", ",string,") {
				return nil
			}
			if n != "" {
				name = n
			}
		}
		switch f.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Float64,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return nil
		}
		if f.Type.PkgPath() != "" {
			// A named type (type Level string) may have its own
			// UnmarshalJSON or UnmarshalText: encoding/json decides.
			return nil
		}
		for _, other := range d.fields {
			if other.name == name {
				return nil // encoding/json's rules for duplicate names apply
			}
		}
		d.fields = append(d.fields, flatField{name: name, kind: f.Type.Kind(), offset: f.Offset})
	}
	return d
}

// decode sets the fields of the struct at dst from args, and reports
// whether it could decode every member exactly as encoding/json does. On
// false dst may be partly set; the caller decodes afresh.
func (d *flatArgs) decode(dst unsafe.Pointer, args protocol.Object) bool {
	for _, m := range args {
		f := d.field(m.Name)
		if f == nil || len(m.Value) == 0 {
			return false
		}
		if !f.set(unsafe.Add(dst, f.offset), m.Value) {
			return false
		}
	}
	return true
}

func (d *flatArgs) field(name string) *flatField {
	for i := range d.fields {
		if d.fields[i].name == name {
			return &d.fields[i]
		}
	}
	return nil
}

// set decodes one value (valid JSON, without surrounding space) into the
// field at p.
func (f *flatField) set(p unsafe.Pointer, raw json.RawMessage) bool {
	switch f.kind {
	case reflect.String:
		s, ok := protocol.String(raw)
		if !ok {
			return false
		}
		*(*string)(p) = s
	case reflect.Bool:
		switch string(raw) {
		case "true":
			*(*bool)(p) = true
		case "false":
			*(*bool)(p) = false
		default:
			return false
		}
	case reflect.Float64:
		if c := raw[0]; c != '-' && (c < '0' || c > '9') {
			return false
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return false
		}
		*(*float64)(p) = v
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := intBits(f.kind)
		v, err := strconv.ParseInt(string(raw), 10, bits)
		if err != nil {
			return false // a fraction, an exponent, out of range: encoding/json's
		}
		switch f.kind {
		case reflect.Int:
			*(*int)(p) = int(v)
		case reflect.Int8:
			*(*int8)(p) = int8(v)
		case reflect.Int16:
			*(*int16)(p) = int16(v)
		case reflect.Int32:
			*(*int32)(p) = int32(v)
		default:
			*(*int64)(p) = v
		}
	default: // the unsigned kinds
		if raw[0] == '-' {
			return false
		}
		v, err := strconv.ParseUint(string(raw), 10, intBits(f.kind))
		if err != nil {
			return false
		}
		switch f.kind {
		case reflect.Uint:
			*(*uint)(p) = uint(v)
		case reflect.Uint8:
			*(*uint8)(p) = uint8(v)
		case reflect.Uint16:
			*(*uint16)(p) = uint16(v)
		case reflect.Uint32:
			*(*uint32)(p) = uint32(v)
		default:
			*(*uint64)(p) = v
		}
	}
	return true
}

func intBits(k reflect.Kind) int {
	switch k {
	case reflect.Int, reflect.Uint:
		return strconv.IntSize
	case reflect.Int8, reflect.Uint8:
		return 8
	case reflect.Int16, reflect.Uint16:
		return 16
	case reflect.Int32, reflect.Uint32:
		return 32
	}
	return 64
}
