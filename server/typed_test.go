package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type weatherArgs struct {
	City  string   `json:"city" jsonschema:"the city to report on"`
	Days  int      `json:"days,omitempty" jsonschema:"how many days ahead"`
	Units string   `json:"units,omitzero"`
	Tags  []string `json:"tags,omitempty"`
	Inner *struct {
		Deep bool `json:"deep"`
	} `json:"inner,omitempty"`
	Ignored string `json:"-"`
}

type weatherReport struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC" jsonschema:"temperature in degrees Celsius"`
	Count int     `json:"count"`
}

func weatherHandler(_ context.Context, _ *CallToolRequest, in weatherArgs) (*CallToolResult, weatherReport, error) {
	if in.City == "nowhere" {
		return nil, weatherReport{}, errors.New("no such city")
	}
	return nil, weatherReport{City: in.City, TempC: 21.5, Count: in.Days}, nil
}

// callTyped validates args against the tool's input schema, as the runtime
// does, then runs the handler typedTool built.
func callTyped(t *testing.T, tool *Tool, h ToolHandler, args string) (*CallToolResult, error) {
	t.Helper()
	in, err := compileSchema(tool.InputSchema)
	if err != nil {
		t.Fatalf("input schema: %v", err)
	}
	if msg := in.validateArguments(json.RawMessage(args)); msg != "" {
		t.Fatalf("arguments %s: %s", args, msg)
	}
	return h(context.Background(), &CallToolRequest{Name: tool.Name, Arguments: json.RawMessage(args)})
}

func TestTypedSchemas(t *testing.T) {
	orig := &Tool{Name: "weather", Description: "Reports the weather"}
	tool, _, err := typedTool(orig, weatherHandler)
	if err != nil {
		t.Fatal(err)
	}
	if orig.InputSchema != nil || orig.OutputSchema != nil {
		t.Error("typedTool modified its argument")
	}
	if tool.Name != "weather" || tool.Description != "Reports the weather" {
		t.Errorf("tool fields not copied: %+v", tool)
	}
	var in struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Additional *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(tool.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if in.Type != "object" || !reflect.DeepEqual(in.Required, []string{"city"}) || in.Additional == nil || *in.Additional {
		t.Errorf("input schema %s", tool.InputSchema)
	}
	if got := strings.Join(slices.Sorted(maps.Keys(in.Properties)), ","); got != "city,days,inner,tags,units" {
		t.Errorf("input properties %s", got)
	}
	if got := string(in.Properties["city"]); got != `{"type":"string","description":"the city to report on"}` {
		t.Errorf("city property %s", got)
	}
	// Properties are listed in field order.
	if i, j := strings.Index(string(tool.InputSchema), `"city"`), strings.Index(string(tool.InputSchema), `"days"`); i > j {
		t.Errorf("properties out of field order: %s", tool.InputSchema)
	}

	out, err := compileSchema(tool.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if !out.isObject() || !reflect.DeepEqual(out.required, []string{"city", "tempC", "count"}) {
		t.Errorf("output schema %s", tool.OutputSchema)
	}
	if !strings.Contains(string(tool.OutputSchema), `"description":"temperature in degrees Celsius"`) {
		t.Errorf("output schema lacks the description: %s", tool.OutputSchema)
	}

	// Explicit schemas win.
	explicit := &Tool{Name: "w", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`)}
	tool, _, err = typedTool(explicit, weatherHandler)
	if err != nil || string(tool.InputSchema) != `{"type":"object"}` || string(tool.OutputSchema) != `{"type":"object"}` {
		t.Errorf("explicit schemas replaced: %v %s %s", err, tool.InputSchema, tool.OutputSchema)
	}
}

func TestTypedCall(t *testing.T) {
	tool, h, err := typedTool(&Tool{Name: "weather"}, weatherHandler)
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTyped(t, tool, h, `{"city":"Oslo","days":3.0,"tags":["a"]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := weatherReport{City: "Oslo", TempC: 21.5, Count: 3}
	if res.IsError || res.StructuredContent != want {
		t.Errorf("result %+v, want structured content %+v", res, want)
	}
	out, _ := compileSchema(tool.OutputSchema)
	if err := out.validateValue(res.StructuredContent); err != nil {
		t.Errorf("structured content fails the output schema: %v", err)
	}

	// A zero struct is still the output: the output schema requires one.
	res, err = callTyped(t, tool, h, `{"city":""}`)
	if err != nil || res.StructuredContent != (weatherReport{TempC: 21.5}) {
		t.Errorf("zero-ish output: %+v, %v", res, err)
	}

	// A returned error passes through; the runtime makes it isError.
	sentinel := errors.New("boom")
	_, h2, _ := typedTool(&Tool{Name: "f"}, func(context.Context, *CallToolRequest, weatherArgs) (*CallToolResult, weatherReport, error) {
		return &CallToolResult{Content: []Content{TextContent("ignored")}}, weatherReport{}, sentinel
	})
	if res, err := callTyped(t, tool, h2, `{"city":"x"}`); !errors.Is(err, sentinel) || res != nil {
		t.Errorf("error: got %+v, %v", res, err)
	}

	// The handler's result is kept, copied, and completed.
	shared := &CallToolResult{Content: []Content{TextContent("hi")}}
	_, h3, _ := typedTool(&Tool{Name: "s"}, func(context.Context, *CallToolRequest, weatherArgs) (*CallToolResult, weatherReport, error) {
		return shared, weatherReport{City: "c"}, nil
	})
	res, _ = callTyped(t, tool, h3, `{"city":"x"}`)
	if res == shared || shared.StructuredContent != nil || len(res.Content) != 1 || res.StructuredContent != (weatherReport{City: "c"}) {
		t.Errorf("shared result: %+v (shared %+v)", res, shared)
	}
}

func TestTypedDecodeErrors(t *testing.T) {
	type args struct {
		N int8 `json:"n"`
	}
	tool, h, err := typedTool(&Tool{Name: "n"}, func(context.Context, *CallToolRequest, args) (*CallToolResult, any, error) {
		t.Error("handler ran")
		return nil, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tool.OutputSchema != nil {
		t.Errorf("Out any has output schema %s", tool.OutputSchema)
	}
	// Validation (minimum/maximum of int8) rejects 300 first; a value that
	// passes the schema but not the Go type becomes an isError result.
	in, _ := compileSchema(tool.InputSchema)
	if msg := in.validateArguments(json.RawMessage(`{"n":300}`)); msg != "Invalid arguments: n: must be <= 127" {
		t.Errorf("int8 bound: %q", msg)
	}
	res, err := h(context.Background(), &CallToolRequest{Arguments: json.RawMessage(`{"n":"x"}`)})
	if err != nil || !res.IsError || len(res.Content) != 1 || res.Content[0].Text != "Invalid arguments: n: cannot use string" {
		t.Errorf("decode error: %+v, %v", res, err)
	}
}

func TestTypedOutputKinds(t *testing.T) {
	type item struct {
		ID int `json:"id"`
	}
	// Pointer Out: schema of the element type; nil means no output.
	tool, h, err := typedTool(&Tool{Name: "p"}, func(_ context.Context, _ *CallToolRequest, in map[string]any) (*CallToolResult, *item, error) {
		if in["none"] != nil {
			return nil, nil, nil
		}
		return nil, &item{ID: 7}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := compileSchema(tool.OutputSchema); !out.isObject() {
		t.Errorf("pointer Out: output schema %s", tool.OutputSchema)
	}
	if res, _ := callTyped(t, tool, h, `{}`); !reflect.DeepEqual(res.StructuredContent, &item{ID: 7}) {
		t.Errorf("pointer Out: %+v", res)
	}
	if res, _ := callTyped(t, tool, h, `{"none":true}`); res.StructuredContent != nil || res.IsError {
		t.Errorf("nil pointer Out: %+v", res)
	}

	// Slice Out (list_out): an array schema, which is not an object schema.
	tool, _, err = typedTool(&Tool{Name: "l"}, func(context.Context, *CallToolRequest, struct{}) (*CallToolResult, []item, error) {
		return nil, []item{{1}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := compileSchema(tool.OutputSchema); out.isObject() || !strings.Contains(string(tool.OutputSchema), `"array"`) {
		t.Errorf("slice Out: output schema %s", tool.OutputSchema)
	}

	// In any: {"type":"object"}.
	tool, h, err = typedTool(&Tool{Name: "a"}, func(_ context.Context, _ *CallToolRequest, in any) (*CallToolResult, any, error) {
		return nil, in, nil
	})
	if err != nil || string(tool.InputSchema) != `{"type":"object"}` {
		t.Fatalf("In any: %v %s", err, tool.InputSchema)
	}
	if res, _ := callTyped(t, tool, h, `{"k":1}`); !reflect.DeepEqual(res.StructuredContent, map[string]any{"k": 1.0}) {
		t.Errorf("In any: %+v", res)
	}
}

func TestTypedBadTypes(t *testing.T) {
	if _, _, err := typedTool(&Tool{Name: "s"}, func(context.Context, *CallToolRequest, string) (*CallToolResult, any, error) {
		return nil, nil, nil
	}); err == nil || !strings.Contains(err.Error(), "no object schema") {
		t.Errorf("string In: %v", err)
	}
	if _, _, err := typedTool(&Tool{Name: "c"}, func(context.Context, *CallToolRequest, struct{ C chan int }) (*CallToolResult, any, error) {
		return nil, nil, nil
	}); err == nil {
		t.Error("chan field: no error")
	}
	if _, _, err := typedTool[struct{}, any](&Tool{Name: "nil"}, nil); err == nil {
		t.Error("nil handler: no error")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"s"`) {
			t.Errorf("AddTool did not panic naming the tool: %v", r)
		}
	}()
	AddTool(&Server{}, &Tool{Name: "s"}, func(context.Context, *CallToolRequest, int) (*CallToolResult, any, error) {
		return nil, nil, nil
	})
}

func TestTypedSchemaCache(t *testing.T) {
	a, err := inferSchema(reflect.TypeFor[weatherArgs]())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := inferSchema(reflect.TypeFor[*weatherArgs]())
	if a != b {
		t.Error("schema of T and *T inferred twice")
	}
	raw := a.raw()
	raw[0] = 'X'
	if a.json[0] != '{' {
		t.Error("raw() shares the cached bytes")
	}
}

func TestTypedIntegersAsIntegers(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":5.0,"b":[1e2,2.5],"c":"5.0"}`: `{"a":5,"b":[100,2.5],"c":"5.0"}`,
		`{"a":1e999999999}`:                 ``,
		`{"a":1.5}`:                         ``,
	} {
		got, ok := integersAsIntegers(json.RawMessage(in))
		if string(got) != want || ok != (want != "") {
			t.Errorf("integersAsIntegers(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
}
