package server

import (
	"encoding/json"
	"testing"
)

// The flat fast path never changes an answer: every argument object gets
// the same text with and without it.
func TestFlatSchemaAgreesWithValidator(t *testing.T) {
	schemas := []string{
		`{"type":"object","properties":{"text":{"type":"string","description":"d"}},"required":["text"]}`,
		`{"type":"object","properties":{"n":{"type":"integer"},"x":{"type":"number"},"b":{"type":"boolean"}},"required":["n","b"],"additionalProperties":false}`,
	}
	args := []string{
		`{}`, `{"text":"a"}`, `{"text":5}`, `{"text":null}`, `{"text":"a","extra":[1]}`,
		`{"n":1,"b":true}`, `{"n":1.0,"b":false}`, `{"n":1.5,"b":true}`, `{"n":1e2,"b":true}`,
		`{"n":-7,"x":2.5e3,"b":true}`, `{"n":"1","b":true}`, `{"n":1,"b":"true"}`, `{"n":1,"b":true,"y":0}`,
		`{"n":1}`, `{"b":true,"x":"no"}`, `{"n":` + "1234567890123456789012345678901234567890" + `,"b":true}`,
	}
	for _, raw := range schemas {
		s, err := compileSchema(json.RawMessage(raw))
		if err != nil || s.flat == nil {
			t.Fatalf("%s: flat = %v, err %v", raw, s.flat, err)
		}
		slow := *s
		slow.flat = nil
		for _, a := range args {
			if got, want := s.validateArguments(json.RawMessage(a)), slow.validateArguments(json.RawMessage(a)); got != want {
				t.Errorf("schema %s, args %s: fast %q, full validator %q", raw, a, got, want)
			}
		}
	}
}

// Schemas outside the flat shape keep the full validator.
func TestFlatSchemaShape(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`,
		`{"type":"object","properties":{"a":{"type":"array"}}}`,
		`{"type":"object","properties":{"s":{"type":"string","enum":["a"]}}}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"object","properties":{"s":{"type":["string","null"]}}}`,
	} {
		s, err := compileSchema(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if s.flat != nil {
			t.Errorf("%s compiled flat", raw)
		}
	}
}
