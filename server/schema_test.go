package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, raw string) *schema {
	t.Helper()
	s, err := compileSchema(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("compileSchema(%s): %v", raw, err)
	}
	return s
}

const argsSchema = `{
	"type": "object",
	"properties": {
		"a": {"type": "string"},
		"b": {"type": "integer", "minimum": 1},
		"c": {"type": "number"},
		"mode": {"enum": ["fast", "slow", 3]},
		"user": {
			"type": "object",
			"properties": {"age": {"type": "integer"}, "name": {"type": "string"}},
			"required": ["name"]
		},
		"tags": {"type": "array", "items": {"type": "string"}},
		"pet": {"$ref": "#/$defs/pet"},
		"a/b": {"type": "boolean"}
	},
	"required": ["a", "c"],
	"$defs": {"pet": {"type": "object", "properties": {"legs": {"type": "integer"}}}}
}`

var big64 = "1" + strings.Repeat("0", 63) // a 64-digit integer

func TestSchemaValidateArguments(t *testing.T) {
	s := mustCompile(t, argsSchema)
	strict := mustCompile(t, `{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`)
	for _, tc := range []struct {
		name   string
		schema *schema
		args   string
		want   string
	}{
		{"valid", s, `{"a":"x","c":1.5}`, ""},
		{"absent arguments", strict, ``, ""},
		{"missing in schema order", s, `{}`, "Missing required arguments: a, c"},
		{"missing one", s, `{"c":2,"b":"wrong type too"}`, "Missing required arguments: a"},
		{"wrong type", s, `{"a":5,"c":1}`, "Invalid arguments: a: expected string, got integer"},
		{"integer 5", s, `{"a":"x","c":1,"b":5}`, ""},
		{"integer 5.0", s, `{"a":"x","c":1,"b":5.0}`, ""},
		{"integer 5e0", s, `{"a":"x","c":1,"b":5e0}`, ""},
		{"integer 5.5", s, `{"a":"x","c":1,"b":5.5}`, "Invalid arguments: b: expected integer, got number"},
		{"minimum", s, `{"a":"x","c":1,"b":0}`, "Invalid arguments: b: must be >= 1"},
		{"64-digit number", s, `{"a":"x","c":` + big64 + `}`, ""},
		{"64-digit integer", s, `{"a":"x","c":1,"b":` + big64 + `}`, ""},
		{"huge number", s, `{"a":"x","c":1e400}`, ""},
		{"huge integer", s, `{"a":"x","c":1,"b":-1e400}`, "Invalid arguments: b: must be >= 1"},
		{"tiny number", s, `{"a":"x","c":1e-400}`, ""},
		{"enum", s, `{"a":"x","c":1,"mode":"slowest"}`, `Invalid arguments: mode: must be one of "fast", "slow", 3`},
		{"enum number", s, `{"a":"x","c":1,"mode":3.0}`, ""},
		{"nested type", s, `{"a":"x","c":1,"user":{"name":"n","age":"old"}}`, "Invalid arguments: user.age: expected integer, got string"},
		{"nested required", s, `{"a":"x","c":1,"user":{}}`, "Invalid arguments: user: missing required properties: name"},
		{"array item", s, `{"a":"x","c":1,"tags":["a",2]}`, "Invalid arguments: tags[]: expected string, got integer"},
		{"through $ref", s, `{"a":"x","c":1,"pet":{"legs":"four"}}`, "Invalid arguments: pet.legs: expected integer, got string"},
		{"escaped name", s, `{"a":"x","c":1,"a/b":1}`, "Invalid arguments: a/b: expected boolean, got integer"},
		{"additional allowed", s, `{"a":"x","c":1,"zzz":1}`, ""},
		{"additionalProperties false", strict, `{"x":"1","y":2}`, "Invalid arguments: unexpected properties: y"},
		{"not JSON", strict, `{"x":`, "Invalid arguments: arguments are not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.schema.validateArguments(json.RawMessage(tc.args)); got != tc.want {
				t.Errorf("validateArguments(%s)\n got %q\nwant %q", tc.args, got, tc.want)
			}
		})
	}
}

func TestSchemaReasons(t *testing.T) {
	for _, tc := range []struct{ schema, value, want string }{
		{`{"type":["string","null"]}`, `1`, "expected string or null, got integer"},
		{`{"const":"on"}`, `"off"`, `must be "on"`},
		{`{"maxLength":2}`, `"abc"`, "must have at most 2 characters"},
		{`{"pattern":"^a"}`, `"b"`, `must match the pattern "^a"`},
		{`{"minItems":1}`, `[]`, "must have at least 1 items"},
		{`{"uniqueItems":true}`, `[1,1]`, "items must be unique"},
		{`{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `true`, "must match at least one of the schemas in anyOf"},
		{`{"prefixItems":[{"type":"string"}]}`, `[1]`, "[0]: expected string, got integer"},
		{`{"additionalProperties":{"type":"integer"}}`, `{"k":"v"}`, "*: expected integer, got string"},
		{`{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, "a requires b"},
	} {
		s := mustCompile(t, tc.schema)
		var v any
		if err := json.Unmarshal([]byte(tc.value), &v); err != nil {
			t.Fatal(err)
		}
		err := s.validateValue(v)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s with %s: got %v, want %q", tc.schema, tc.value, err, tc.want)
		}
	}
}

func TestSchemaValidateValue(t *testing.T) {
	// The list_out case of docs/protocol.md §14: an array output schema.
	list := mustCompile(t, `{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}}`)
	if list.isObject() {
		t.Error("array schema: isObject true")
	}
	if err := list.validateValue([]any{map[string]any{"id": 1.0}, map[string]any{"id": 2}}); err != nil {
		t.Errorf("valid array: %v", err)
	}
	if err := list.validateValue([]any{map[string]any{"id": "x"}}); err == nil || err.Error() != "[].id: expected integer, got string" {
		t.Errorf("invalid item: got %v", err)
	}
	if err := list.validateValue(map[string]any{}); err == nil || err.Error() != "expected array, got object" {
		t.Errorf("object for array: got %v", err)
	}
	// Values that are not generic JSON are judged by their JSON form.
	type item struct {
		ID int `json:"id"`
	}
	if err := list.validateValue([]item{{1}, {2}}); err != nil {
		t.Errorf("typed slice: %v", err)
	}
	if err := list.validateValue(json.RawMessage(`[{"id":3}]`)); err != nil {
		t.Errorf("raw JSON: %v", err)
	}
	if err := list.validateValue(json.RawMessage(`[{}]`)); err == nil || err.Error() != "[]: missing required properties: id" {
		t.Errorf("raw JSON missing id: got %v", err)
	}
	if err := list.validateValue(func() {}); err == nil {
		t.Error("func value: no error")
	}
}

func TestSchemaCompile(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		object bool
	}{
		{``, true},
		{`{"type":"object"}`, true},
		{`{"type":"array"}`, false},
		{`{"properties":{"a":{}}}`, false}, // no "type":"object" at the root
		{`true`, false},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s"}}}`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, true},
	} {
		s := mustCompile(t, tc.raw)
		if s.isObject() != tc.object {
			t.Errorf("%s: isObject %v, want %v", tc.raw, s.isObject(), tc.object)
		}
	}
	if got := string(mustCompile(t, ``).json()); got != `{"type":"object"}` {
		t.Errorf("default schema JSON %s", got)
	}
	const registered = `{ "type" : "object" }`
	if got := string(mustCompile(t, registered).json()); got != registered {
		t.Errorf("json() = %s, want the schema as registered", got)
	}
	for _, raw := range []string{
		`{`,
		`[]`,
		`"object"`,
		`{"type":"strin"}`,
		`{"properties":{"a":{"type":["string","nul"]}}}`,
		`{"type":5}`,
		`{"minimum":"a"}`,
		`{"pattern":"("}`,
		`{"$ref":"#/nope"}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#"}`,
	} {
		if _, err := compileSchema(json.RawMessage(raw)); err == nil {
			t.Errorf("compileSchema(%s): no error", raw)
		} else if strings.Contains(err.Error(), "schemaWithoutMethods") {
			t.Errorf("compileSchema(%s): error names Go types: %v", raw, err)
		}
	}
}

func TestSchemaDraft07(t *testing.T) {
	s := mustCompile(t, `{"$schema":"http://json-schema.org/draft-07/schema","type":"object",
		"properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}]}},"required":["pair"]}`)
	if got := s.validateArguments(json.RawMessage(`{"pair":["a",1]}`)); got != "" {
		t.Errorf("valid: %q", got)
	}
	if got := s.validateArguments(json.RawMessage(`{"pair":["a","b"]}`)); got != "Invalid arguments: pair[1]: expected integer, got string" {
		t.Errorf("invalid tuple item: %q", got)
	}
	if got := s.validateArguments(json.RawMessage(`{}`)); got != "Missing required arguments: pair" {
		t.Errorf("missing: %q", got)
	}
}

func TestSchemaTrivial(t *testing.T) {
	s := mustCompile(t, `{"type":"object","description":"anything"}`)
	if !s.trivial {
		t.Fatal("not trivial")
	}
	if got := s.validateArguments(json.RawMessage(`{"x":1}`)); got != "" {
		t.Errorf("object: %q", got)
	}
	if got := s.validateArguments(json.RawMessage(`[1]`)); got != "Invalid arguments: expected object, got array" {
		t.Errorf("array: %q", got)
	}
	if mustCompile(t, `{"type":"object","required":["a"]}`).trivial {
		t.Error("schema with required is trivial")
	}
}

func BenchmarkValidateArguments(b *testing.B) {
	s := mustCompile(b, argsSchema)
	args := json.RawMessage(`{"a":"hello","b":3,"c":2.5,"mode":"fast","tags":["x","y"],"user":{"name":"n","age":30}}`)
	if got := s.validateArguments(args); got != "" {
		b.Fatal(got)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.validateArguments(args)
	}
}

func BenchmarkValidateArgumentsSmall(b *testing.B) {
	s := mustCompile(b, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	args := json.RawMessage(`{"text":"hello"}`)
	b.ReportAllocs()
	for b.Loop() {
		s.validateArguments(args)
	}
}
