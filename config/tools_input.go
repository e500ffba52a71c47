package config

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Text is a command element, or stdin, with its {{name}} placeholders
// parsed: literal parts and placeholders in order. A placeholder is
// {{name}} exactly (a letter or _, then letters, digits, _ and -); any
// other text, {{ name }} included, is literal. The empty Text is the
// empty string.
type Text []TextPart

// TextPart is literal text, or (Arg not "") a placeholder.
type TextPart struct {
	Literal string
	Arg     string
}

// Exact returns the argument of a Text that is one placeholder and
// nothing else: such an element is removed when the argument is absent
// and expands to one element per item of an array.
func (t Text) Exact() (string, bool) {
	if len(t) == 1 && t[0].Arg != "" {
		return t[0].Arg, true
	}
	return "", false
}

var placeholder = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_-]*)\}\}`)

// argumentName is what an argument's name must be for {{name}} to reach
// it.
var argumentName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func parseText(s string) Text {
	var t Text
	at := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > at {
			t = append(t, TextPart{Literal: s[at:m[0]]})
		}
		t = append(t, TextPart{Arg: s[m[2]:m[3]]})
		at = m[1]
	}
	if at < len(s) {
		t = append(t, TextPart{Literal: s[at:]})
	}
	return t
}

// argumentEntry is one input.NAME of a tool as written.
type argumentEntry struct {
	Description string    `key:"description"`
	Type        string    `key:"type,oneof=string|integer|number|boolean|array"`
	Required    bool      `key:"required"`
	Enum        *[]string `key:"enum"`
	Default     *anyValue `key:"default"`
}

func (a *argumentEntry) setDefaults() { a.Type = "string" }

// anyValue is a field whose value is judged later, by another field
// (an argument's default, by its type).
type anyValue struct{ v any }

func (a *anyValue) decodeEntry(_ field, raw any) { a.v = raw }

// schemaValue is a JSON Schema given as a table, or as a string holding
// JSON: its compact JSON, an object. Whether it is a schema the runtime
// compiles is checked by catalog.Check.
type schemaValue struct{ raw json.RawMessage }

func (s *schemaValue) decodeEntry(f field, v any) {
	var raw []byte
	switch v := v.(type) {
	case string:
		raw = []byte(v)
	case map[string]any:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			f.problem("cannot be written as JSON: " + err.Error())
			return
		}
	default:
		f.problem("must be a JSON Schema: a table, or a string holding JSON, got " + literal(v))
		return
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		f.problem("must be a JSON Schema object, got " + literal(v))
		return
	}
	s.raw, _ = json.Marshal(obj)
}

// input returns the declared arguments (input, or input_schema's
// properties) and the input schema.
func (e *toolEntry) input(f field) ([]Argument, json.RawMessage) {
	if e.InputSchema != nil {
		if e.Input != nil {
			f.child("input_schema").problem("cannot be given with input: declare the arguments with one of them")
		}
		return schemaArguments(f.child("input_schema"), e.InputSchema.raw), e.InputSchema.raw
	}
	var args []Argument
	properties := map[string]any{}
	required := []string{}
	for _, name := range slices.Sorted(maps.Keys(e.Input)) {
		a, schema := e.Input[name].argument(f.child("input").child(name), name)
		args = append(args, *a)
		properties[name] = schema
		if a.Required {
			required = append(required, name)
		}
	}
	raw, _ := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           properties,
		"required":             required,
		"additionalProperties": false,
	})
	return args, raw
}

// argument checks one input.NAME and returns it with its property schema.
func (ae argumentEntry) argument(f field, name string) (*Argument, map[string]any) {
	if !argumentName.MatchString(name) {
		f.problem("is not a valid argument name: a letter or _, then letters, digits, _ and -")
	}
	a := &Argument{Name: name, Description: ae.Description, Type: ae.Type, Required: ae.Required}
	schema := map[string]any{"type": a.Type}
	if a.Description != "" {
		schema["description"] = a.Description
	}
	if a.Type == "array" {
		schema["items"] = map[string]any{"type": "string"}
	}
	if ae.Enum != nil {
		a.Enum = *ae.Enum
		switch {
		case a.Type != "string":
			f.child("enum").problem(`is for string arguments only, got type = ` + literal(a.Type))
		case len(a.Enum) == 0:
			f.child("enum").problem("must list at least one value, got []")
		default:
			schema["enum"] = a.Enum
		}
	}
	if ae.Default != nil {
		if a.Default = defaultValue(a, ae.Default.v); a.Default == nil {
			f.child("default").problem("must be " + typeWords(a) + ", got " + literal(ae.Default.v))
		} else {
			schema["default"] = a.Default
		}
		if a.Required {
			f.child("default").problem("is never used: the argument is required (drop one of them)")
		}
	}
	return a, schema
}

// defaultValue converts raw to a's type, or returns nil.
func defaultValue(a *Argument, raw any) any {
	switch a.Type {
	case "string":
		if s, ok := raw.(string); ok && (a.Enum == nil || slices.Contains(a.Enum, s)) {
			return s
		}
	case "integer":
		if _, text := raw.(string); !text {
			if n, ok := toInt(raw); ok {
				return n
			}
		}
	case "number":
		switch v := raw.(type) {
		case float64:
			return v
		case int64:
			return float64(v)
		case int:
			return float64(v)
		}
	case "boolean":
		if b, ok := raw.(bool); ok {
			return b
		}
	case "array":
		if items, ok := raw.([]any); ok {
			out := []string{}
			for _, it := range items {
				s, ok := it.(string)
				if !ok {
					return nil
				}
				out = append(out, s)
			}
			return out
		}
	}
	return nil
}

func typeWords(a *Argument) string {
	switch {
	case a.Enum != nil:
		return "one of the enum values"
	case a.Type == "array":
		return "a list of strings"
	case a.Type == "boolean":
		return "true or false"
	case a.Type == "integer":
		return "an integer"
	}
	return "a " + a.Type
}

// schemaArguments returns the properties of an input schema as arguments;
// the schema must describe an object.
func schemaArguments(f field, raw json.RawMessage) []Argument {
	if raw == nil {
		return nil
	}
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(raw, &s) != nil || s.Type != "object" {
		f.problem(`must describe an object: {type = "object", properties = {…}}, got ` + literal(strings.TrimSpace(string(raw))))
		return nil
	}
	var args []Argument
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		var p struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Default     any    `json:"default"`
			Enum        []any  `json:"enum"`
		}
		_ = json.Unmarshal(s.Properties[name], &p)
		a := Argument{Name: name, Description: p.Description, Required: slices.Contains(s.Required, name)}
		if t, ok := p.Type.(string); ok && slices.Contains(argumentTypes, t) {
			a.Type = t
		}
		for _, e := range p.Enum {
			if v, ok := e.(string); ok {
				a.Enum = append(a.Enum, v)
			} else {
				a.Enum = nil
				break
			}
		}
		if p.Default != nil {
			a.Default = defaultValue(&a, p.Default)
		}
		args = append(args, a)
	}
	return args
}

// argumentTypes are the types input accepts.
var argumentTypes = []string{"string", "integer", "number", "boolean", "array"}
