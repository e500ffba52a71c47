package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/snodod/snodod/protocol"
)

// This file compiles the JSON Schemas of tools once, at registration, and
// validates arguments and structured output against them on every call
// (docs/protocol.md §6.3, §6.4). Validation is github.com/google/jsonschema-go;
// what is added here is the exact failure text of §6.3, checks the library
// leaves out (unknown type names, unsupported $schema), and JSON decoding
// that keeps numbers beyond float64 validatable.

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

// describe turns a validation error of the library, a chain of
// "validating <schema path>: " wrappers around a keyword's message, into
// "<property path>: <reason>", e.g. `user.age: expected integer, got
// string`. Failures are rare, so this is not on the hot path.
func (s *schema) describe(err error) string {
	var paths []string
	inner := err
	for {
		next := errors.Unwrap(inner)
		if next == nil {
			break
		}
		prefix := strings.TrimSuffix(inner.Error(), next.Error())
		if p, ok := strings.CutPrefix(prefix, "validating "); ok {
			paths = append(paths, strings.TrimSuffix(p, ": "))
		}
		inner = next
	}
	where := instancePath(paths)
	last := "root"
	if len(paths) > 0 {
		last = paths[len(paths)-1]
	}
	why := s.reason(inner.Error(), last)
	if where == "" {
		return why
	}
	return where + ": " + why
}

// instancePath derives where in the value a failure is from the schema
// paths the validator went through: property names, "[]" or "[i]" for
// array items, ".*" for other members. The path of a $ref's target is not
// a place in the value, so after a jump only what extends it counts.
func instancePath(paths []string) string {
	var b strings.Builder
	prev := ""
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") { // "root", or a $id
			prev = ""
			continue
		}
		if prev == "" || strings.HasPrefix(p, prev+"/") {
			segs := strings.Split(strings.TrimPrefix(p[len(prev):], "/"), "/")
			for i := 0; i < len(segs); i++ {
				next := ""
				if i+1 < len(segs) {
					next = segs[i+1]
				}
				switch segs[i] {
				case "properties":
					b.WriteString("." + unescapePointer(next))
					i++
				case "prefixItems":
					b.WriteString("[" + next + "]")
					i++
				case "items":
					if _, err := strconv.Atoi(next); err == nil { // draft-07 tuple
						b.WriteString("[" + next + "]")
						i++
					} else {
						b.WriteString("[]")
					}
				case "additionalItems", "unevaluatedItems":
					b.WriteString("[]")
				case "additionalProperties", "unevaluatedProperties", "patternProperties":
					b.WriteString(".*")
					if segs[i] == "patternProperties" {
						i++
					}
				case "$defs", "definitions", "dependentSchemas", "dependencies", "allOf", "anyOf", "oneOf":
					i++ // the member name or index that follows is no place in the value
				}
			}
		}
		prev = p
	}
	return strings.TrimPrefix(b.String(), ".")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// quoted matches the Go-quoted strings in a library message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// names returns the Go-quoted strings in msg, unquoted and joined by ", ".
func names(msg string) string {
	var out []string
	for _, q := range quoted.FindAllString(msg, -1) {
		if u, err := strconv.Unquote(q); err == nil {
			out = append(out, u)
		}
	}
	return strings.Join(out, ", ")
}

// reasonFormats word the failures of keywords that have a value to quote.
var reasonFormats = map[string]string{
	"const":            "must be %s",
	"minimum":          "must be >= %s",
	"maximum":          "must be <= %s",
	"exclusiveMinimum": "must be > %s",
	"exclusiveMaximum": "must be < %s",
	"multipleOf":       "must be a multiple of %s",
	"minLength":        "must have at least %s characters",
	"maxLength":        "must have at most %s characters",
	"pattern":          "must match the pattern %s",
	"minItems":         "must have at least %s items",
	"maxItems":         "must have at most %s items",
	"minProperties":    "must have at least %s properties",
	"maxProperties":    "must have at most %s properties",
	"minContains":      "must contain at least %s matching items",
	"maxContains":      "must contain at most %s matching items",
}

var typeMessage = regexp.MustCompile(`has type "([a-z]+)", want (?:one of )?"([^"]*)"$`)

// reason rewords a keyword message of the library, quoting the keyword's
// value from the subschema at path when it can be found; a message it does
// not know is kept as it is.
func (s *schema) reason(msg, path string) string {
	keyword, _, _ := strings.Cut(msg, ":")
	switch keyword {
	case "type":
		if m := typeMessage.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("expected %s, got %s", strings.ReplaceAll(m[2], ", ", " or "), m[1])
		}
	case "enum":
		if values, ok := s.keyword(path, keyword).([]any); ok {
			list := make([]string, 0, len(values))
			for _, v := range values {
				b, _ := json.Marshal(v)
				list = append(list, string(b))
			}
			return "must be one of " + strings.Join(list, ", ")
		}
		return "must be one of the allowed values"
	case "required":
		return "missing required properties: " + names(msg)
	case "uniqueItems":
		return "items must be unique"
	case "contains":
		return "must contain a matching item"
	case "anyOf":
		return "must match at least one of the schemas in anyOf"
	case "oneOf":
		return "must match exactly one of the schemas in oneOf"
	case "not":
		return "must not match the schema in not"
	}
	if format, ok := reasonFormats[keyword]; ok {
		if v := s.keyword(path, keyword); v != nil {
			b, _ := json.Marshal(v)
			return fmt.Sprintf(format, b)
		}
	}
	if strings.HasPrefix(msg, "unexpected additional properties") {
		return "unexpected properties: " + names(msg)
	}
	if dependent, missing, ok := strings.Cut(msg, "]: missing properties"); ok && strings.HasPrefix(msg, "dependentRequired[") {
		return fmt.Sprintf("%s requires %s", names(dependent), names(missing))
	}
	return msg
}

// keyword returns the decoded value of keyword in the subschema at the
// validator's path ("root" or a JSON Pointer), or nil when not found.
func (s *schema) keyword(path, keyword string) any {
	node := s.doc
	if path != "root" {
		if !strings.HasPrefix(path, "/") {
			return nil
		}
		for _, seg := range strings.Split(path[1:], "/") {
			switch n := node.(type) {
			case map[string]any:
				node = n[unescapePointer(seg)]
			case []any:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(n) {
					return nil
				}
				node = n[i]
			default:
				return nil
			}
		}
	}
	if m, ok := node.(map[string]any); ok {
		return m[keyword]
	}
	return nil
}
