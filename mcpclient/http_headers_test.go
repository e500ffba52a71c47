package mcpclient

import (
	"encoding/json"
	"testing"
)

// TestCheckParamHeaders: the x-mcp-header rules of 2026-07-28 (SEP-2243),
// each broken once, beside valid annotations.
func TestCheckParamHeaders(t *testing.T) {
	for _, c := range []struct {
		schema string
		valid  bool
	}{
		{`{"type":"object"}`, true},
		{`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`, true},
		{`{"type":"object","properties":{"a":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}},"b":{"type":"boolean","x-mcp-header":"B"}}}`, true},
		{`{"type":"object","x-mcp-header":"Root"}`, false},
		{`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":""}}}`, false},
		{`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Has Space"}}}`, false},
		{`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"},"s":{"type":"string","x-mcp-header":"r"}}}`, false},
		{`{"type":"object","properties":{"r":{"type":"object","x-mcp-header":"R"}}}`, false},
		{`{"type":"object","properties":{"r":{"type":"array","items":{"type":"string","x-mcp-header":"R"}}}}`, false},
		{`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":7}}}`, false},
	} {
		err := CheckParamHeaders(json.RawMessage(c.schema))
		if (err == nil) != c.valid {
			t.Errorf("%s: %v, want valid %v", c.schema, err, c.valid)
		}
	}
}
