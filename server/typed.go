package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/google/jsonschema-go/jsonschema"
)

// TypedToolHandler runs a tool registered with AddTool. in holds the
// arguments, already validated against the input schema and decoded. A
// non-nil Out becomes the result's structuredContent (unless the result
// sets StructuredContent itself); a nil result means an empty one. A
// returned error is reported as with ToolHandler: an isError result holding
// its text. The other rules of ToolHandler (ctx, progress, panics) apply.
type TypedToolHandler[In, Out any] func(ctx context.Context, req *CallToolRequest, in In) (*CallToolResult, Out, error)

// AddTool registers a tool whose arguments decode into In and whose
// structured output is Out, as Server.AddTool does (replacing a tool of the
// same name; t is copied).
//
// Unless t.InputSchema is set, the input schema is inferred from In with
// jsonschema.For: a struct's exported fields become properties named by
// their json tags, fields without omitempty or omitzero are required, a
// `jsonschema:"…"` tag is the property's description, and properties not
// declared are refused. In must then be a struct, a map with string keys
// or a pointer to one (its schema must be an object schema); In of type
// any means {"type":"object"}. Unless t.OutputSchema is set or Out is
// any, the output schema is inferred from Out likewise (a pointer's from
// its element type); it need not be an object schema, but legacy
// protocol versions list only tools whose schemas are (docs/protocol.md §6.1).
// Inferred schemas are computed once per type.
//
// Out becomes structuredContent whenever it holds a value: a struct, even
// a zero one, always does; a nil pointer or a nil any does not. When the
// result has no content, the runtime adds a text block with the compact
// JSON of the structured content.
//
// AddTool panics on a programmer error: a nil tool or handler, or a type
// whose schema cannot be inferred or is not an object schema for In.
func AddTool[In, Out any](s *Server, t *Tool, h TypedToolHandler[In, Out]) {
	tool, handler, err := typedTool(t, h)
	if err != nil {
		panic("server: AddTool: " + err.Error())
	}
	s.AddTool(tool, handler)
}

// typedTool returns a copy of t with its schemas filled in and the
// ToolHandler that runs h.
func typedTool[In, Out any](t *Tool, h TypedToolHandler[In, Out]) (*Tool, ToolHandler, error) {
	if t == nil || h == nil {
		return nil, nil, errors.New("needs a tool and a handler")
	}
	tool := *t
	if tool.InputSchema == nil {
		in, err := inferSchema(reflect.TypeFor[In]())
		if err != nil {
			return nil, nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
		if !in.object {
			return nil, nil, fmt.Errorf("tool %q: input type %s has no object schema: use a struct or a map with string keys", t.Name, reflect.TypeFor[In]())
		}
		tool.InputSchema = in.raw()
	}
	if tool.OutputSchema == nil && reflect.TypeFor[Out]() != reflect.TypeFor[any]() {
		out, err := inferSchema(reflect.TypeFor[Out]())
		if err != nil {
			return nil, nil, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
		}
		tool.OutputSchema = out.raw()
	}
	flat := newFlatArgs(reflect.TypeFor[In]())
	handler := func(ctx context.Context, req *CallToolRequest) (*CallToolResult, error) {
		var in In
		var err error
		decoded := false
		if flat != nil {
			if members, ok := req.argumentMembers(); ok {
				decoded = flat.decode(unsafe.Pointer(&in), members)
			}
		}
		if !decoded {
			in, err = decodeArguments[In](req.Arguments)
		}
		if err != nil {
			return &CallToolResult{
				Content: []Content{TextContent("Invalid arguments: " + err.Error())},
				IsError: true,
			}, nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			return nil, err // the runtime makes it an isError result, or an input request
		}
		if res != nil && (res.StructuredContent != nil || !holdsValue(out)) {
			return res, nil // nothing to add: the runtime only reads it
		}
		var result CallToolResult // a copy: the handler may return a shared result
		if res != nil {
			result = *res
		}
		if result.StructuredContent == nil && holdsValue(out) {
			result.StructuredContent = out
		}
		return &result, nil
	}
	return &tool, handler, nil
}

// holdsValue reports whether v is neither a nil interface nor a nil pointer.
func holdsValue(v any) bool {
	if v == nil {
		return false
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() != reflect.Pointer || !rv.IsNil()
}

// inferred is the schema inferred for one Go type.
type inferred struct {
	json   json.RawMessage
	object bool
}

// raw returns a copy of the schema's JSON, so no tool shares the cache's.
func (i *inferred) raw() json.RawMessage { return append(json.RawMessage(nil), i.json...) }

var (
	inferredMu sync.Mutex
	inferredBy = map[reflect.Type]*inferred{}
)

// inferSchema returns the schema of t (of its element type if t is a
// pointer), inferred by jsonschema.ForType and compiled to check it.
// Results are cached; errors are not, as they end in a panic.
func inferSchema(t reflect.Type) (*inferred, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	inferredMu.Lock()
	defer inferredMu.Unlock()
	if i := inferredBy[t]; i != nil {
		return i, nil
	}
	var raw json.RawMessage
	if t.Kind() == reflect.Interface && t.NumMethod() == 0 {
		raw = defaultObjectSchema
	} else {
		js, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
		if err != nil {
			return nil, err
		}
		if raw, err = json.Marshal(js); err != nil {
			return nil, err
		}
	}
	compiled, err := compileSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("type %s: %w", t, err)
	}
	i := &inferred{json: raw, object: compiled.isObject()}
	inferredBy[t] = i
	return i, nil
}

// decodeArguments decodes a validated arguments object into In. Absent
// arguments are {}. JSON Schema counts 5.0 and 1e2 as integers while
// encoding/json refuses them for integer fields, so when a type mismatch
// is reported the numbers with an integer value are rewritten as integers
// and decoding is tried again. The error words the first problem without
// Go type names.
func decodeArguments[In any](args json.RawMessage) (In, error) {
	var in In
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	err := json.Unmarshal(args, &in)
	if err == nil {
		return in, nil
	}
	if _, mismatch := errors.AsType[*json.UnmarshalTypeError](err); mismatch {
		if rewritten, ok := integersAsIntegers(args); ok {
			var again In
			if err = json.Unmarshal(rewritten, &again); err == nil {
				return again, nil
			}
		}
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return in, fmt.Errorf("cannot use %s", te.Value)
		}
		return in, fmt.Errorf("%s: cannot use %s", te.Field, te.Value)
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return in, errors.New("arguments are not valid JSON")
	}
	return in, err
}

// maxExponent bounds the exponents integersAsIntegers expands, so that
// 1e999999999 cannot make it build a billion-digit integer.
const maxExponent = 400

// integersAsIntegers rewrites the numbers of a JSON value that have an
// integer value but a fraction or an exponent (5.0, 1e2) as plain integers.
// It reports whether anything was rewritten.
func integersAsIntegers(data json.RawMessage) (json.RawMessage, bool) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case json.Number:
			n := string(v)
			if !strings.ContainsAny(n, ".eE") {
				return v
			}
			if i := strings.IndexAny(n, "eE"); i >= 0 {
				if e, err := strconv.Atoi(n[i+1:]); err != nil || e > maxExponent || e < -maxExponent {
					return v
				}
			}
			r, ok := new(big.Rat).SetString(n)
			if !ok || !r.IsInt() {
				return v
			}
			changed = true
			return json.Number(r.Num().String())
		}
		return v
	}
	v = walk(v)
	if !changed {
		return nil, false
	}
	out, err := json.Marshal(v)
	return out, err == nil
}
