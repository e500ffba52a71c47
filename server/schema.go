package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/snodod/snodod/protocol"
)

// This file compiles the JSON Schemas of tools once, at registration, and
// validates arguments and structured output against them on every call
// (docs/protocol.md §6.3, §6.4). Validation is github.com/google/jsonschema-go;
// what is added here is the exact failure text of §6.3 (schema_describe.go),
// checks the library leaves out (unknown type names, unsupported $schema),
// and JSON decoding that keeps numbers beyond float64 validatable.

// defaultObjectSchema is the schema of a tool registered without one.
var defaultObjectSchema = json.RawMessage(`{"type":"object"}`)

// schema is a compiled JSON Schema. It is immutable after compileSchema and
// safe for concurrent use.
type schema struct {
	raw      json.RawMessage      // as registered, for tools/list
	doc      any                  // raw decoded, to quote keyword values in failure texts
	resolved *jsonschema.Resolved // what validation runs on
	required []string             // the root's "required", in schema order
	object   bool                 // "type":"object" at the root
	// trivial is set when the schema says nothing but "type":"object"
	// (plus annotations): any arguments object is valid without decoding.
	trivial bool
	// flat, when set, checks arguments of the common flat shape without
	// decoding them (schema_flat.go).
	flat *flatSchema
}

// compileSchema parses and resolves a JSON Schema once. Nil or empty raw
// means {"type":"object"}. A schema without $schema is JSON Schema 2020-12
// (docs/protocol.md §4.3); draft-07 schemas that declare it are accepted too.
// The error, for a programmer error at registration, says what is wrong.
func compileSchema(raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = defaultObjectSchema
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, errors.New("schema is not valid JSON")
	}
	m, isMap := doc.(map[string]any)
	if _, isBool := doc.(bool); !isMap && !isBool {
		return nil, errors.New("a schema must be a JSON object or a boolean")
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, schemaDecodeError(err)
	}
	if err := normalizeDraft(&js); err != nil {
		return nil, err
	}
	if err := checkTypeNames(reflect.ValueOf(&js)); err != nil {
		return nil, err
	}
	resolved, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("invalid schema: %v", err)
	}
	s := &schema{
		raw:      bytes.Clone(raw),
		doc:      doc,
		resolved: resolved,
		required: js.Required,
		object:   js.Type == "object",
	}
	s.trivial = s.object && onlyAnnotations(m)
	if s.object && !s.trivial {
		s.flat = compileFlat(m)
	}
	return s, nil
}

// json returns the schema's JSON as registered (for tools/list).
func (s *schema) json() json.RawMessage { return s.raw }

// isObject reports "type":"object" at the root. Legacy eras hide tools
// whose input or output schema is not an object schema (docs/protocol.md §6.1).
func (s *schema) isObject() bool { return s.object }

// validateArguments validates a tools/call arguments object (raw JSON, {}
// when absent). It returns "" when valid, else the failure text of
// docs/protocol.md §6.3: "Missing required arguments: <names>" when required
// properties are missing (in the schema's order, joined by ", "),
// otherwise "Invalid arguments: <detail>". args is expected to be
// well-formed JSON (the protocol layer decoded it); a schema that is only
// {"type":"object"} accepts any object without decoding it.
func (s *schema) validateArguments(args json.RawMessage) string {
	msg, _, _ := s.validateSplit(args, nil, false)
	return msg
}

// validateSplit is validateArguments given the arguments' members when
// the decoder split them already (have), and returning them when it split
// them itself (ok), for the tool's decoder.
func (s *schema) validateSplit(args json.RawMessage, members protocol.Object, have bool) (string, protocol.Object, bool) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args, members, have = json.RawMessage(`{}`), nil, true
	}
	if s.trivial && args[0] == '{' {
		return "", members, have
	}
	split, ok, msg, sure := s.validFlat(args, members, have)
	if sure {
		return msg, split, ok
	}
	return s.validateSlow(args), split, ok
}

// validateSlow is validateArguments by the full validator.
func (s *schema) validateSlow(args json.RawMessage) string {
	v, err := decodeJSON(args)
	if err != nil {
		return "Invalid arguments: arguments are not valid JSON"
	}
	if obj, ok := v.(map[string]any); ok {
		if msg := missingRequired(s.required, func(name string) bool { _, ok := obj[name]; return ok }); msg != "" {
			return msg
		}
	}
	if err := s.resolved.Validate(v); err != nil {
		return "Invalid arguments: " + s.describe(err)
	}
	return ""
}

// missingRequired is the failure text naming the required members has
// reports absent, in the schema's order; "" when none is missing.
func missingRequired(required []string, has func(string) bool) string {
	var missing []string
	for _, name := range required {
		if !has(name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "Missing required arguments: " + strings.Join(missing, ", ")
}

// validateValue validates any JSON value: generic JSON as produced by
// decoding into any (maps, slices, strings, bools, numbers, nil) as is,
// anything else (a struct, json.RawMessage, json.Number…) after a round
// trip through encoding/json, so that it is judged by its JSON form. The
// error describes the first problem found.
func (s *schema) validateValue(v any) error {
	if !isGenericJSON(v) {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("value cannot be encoded as JSON: %v", err)
		}
		if v, err = decodeJSON(data); err != nil {
			return errors.New("value is not valid JSON")
		}
	}
	if err := s.resolved.Validate(v); err != nil {
		return errors.New(s.describe(err))
	}
	return nil
}

// decodeJSON decodes one JSON value into generic Go values. Numbers are
// float64, as the validator expects: rounded like JavaScript numbers, so a
// 64-digit integer is still an integer and 1e-400 is 0. A number too large
// for a float64 (1e400) becomes ±math.MaxFloat64, keeping its sign, its
// order relative to ordinary bounds and its being an integer.
func decodeJSON(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err == nil {
		return v, nil // the usual case: every number fits
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v = nil
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return clampNumbers(v), nil
}

// clampNumbers replaces the json.Numbers in v by float64s (see decodeJSON).
func clampNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = clampNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = clampNumbers(e)
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil && math.IsInf(f, 0) {
			return math.Copysign(math.MaxFloat64, f)
		}
		return f
	}
	return v
}

// isGenericJSON reports whether v is made only of the values decoding JSON
// into any produces (integers are accepted as numbers too).
func isGenericJSON(v any) bool {
	switch v := v.(type) {
	case nil, bool, string, float64, int, int64:
		return true
	case []any:
		for _, e := range v {
			if !isGenericJSON(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if !isGenericJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// Draft URIs as written in practice, mapped to those the library knows.
var draftURIs = map[string]string{
	"http://json-schema.org/draft-07/schema":       "http://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft-07/schema":      "http://json-schema.org/draft-07/schema#",
	"http://json-schema.org/draft/2020-12/schema":  "https://json-schema.org/draft/2020-12/schema",
	"https://json-schema.org/draft/2020-12/schema": "https://json-schema.org/draft/2020-12/schema",
}

// normalizeDraft accepts "$schema" for draft-07 and 2020-12 with or without
// a trailing "#" and either scheme; any other dialect is an error, so that
// it is refused at registration rather than on every call.
func normalizeDraft(js *jsonschema.Schema) error {
	if js.Schema == "" {
		return nil
	}
	uri, ok := draftURIs[strings.TrimSuffix(js.Schema, "#")]
	if !ok {
		return fmt.Errorf("unsupported $schema %q: use JSON Schema 2020-12 (the default) or draft-07", js.Schema)
	}
	js.Schema = uri
	return nil
}

var jsonTypeNames = map[string]bool{
	"null": true, "boolean": true, "object": true, "array": true,
	"number": true, "integer": true, "string": true,
}

// checkTypeNames rejects unknown names in "type" anywhere in the schema
// v (a *jsonschema.Schema at the top), which the library would accept and
// then fail every value against.
func checkTypeNames(v reflect.Value) error {
	switch {
	case v.Type() == schemaPtrType && v.CanInterface() && !v.IsNil():
		s := v.Interface().(*jsonschema.Schema)
		for _, t := range slices.Concat(s.Types, []string{s.Type}) {
			if t != "" && !jsonTypeNames[t] {
				return fmt.Errorf("invalid schema: unknown type %q", t)
			}
		}
		for i := range v.Elem().NumField() {
			if err := checkTypeNames(v.Elem().Field(i)); err != nil {
				return err
			}
		}
	case (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Type().Elem() == schemaPtrType:
		for _, e := range v.Seq2() {
			if err := checkTypeNames(e); err != nil {
				return err
			}
		}
	}
	return nil
}

var schemaPtrType = reflect.TypeFor[*jsonschema.Schema]()

// onlyAnnotations reports whether the keywords of m other than "type"
// cannot fail a value.
func onlyAnnotations(m map[string]any) bool {
	for k := range m {
		switch k {
		case "type", "$schema", "$id", "$comment", "title", "description",
			"default", "examples", "deprecated", "readOnly", "writeOnly":
		default:
			return false
		}
	}
	return true
}

// schemaDecodeError words a failure to decode a schema without the Go
// types involved.
func schemaDecodeError(err error) error {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := strings.ReplaceAll(te.Field, "schemaWithoutMethods.", "")
		if field == "" {
			return fmt.Errorf("invalid schema: unexpected %s", te.Value)
		}
		return fmt.Errorf("invalid schema: %q cannot be a %s", field, te.Value)
	}
	return fmt.Errorf("invalid schema: %s", strings.TrimPrefix(err.Error(), "json: "))
}
