package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/snodod/snodod/server"
)

// This file holds the fixture's tools that ask the client for input:
// sampling, elicitation and roots. In 2026 they are multi-round-trip
// requests (docs/protocol.md §12); in legacy eras the same calls send the
// request to the client and wait for its answer (§3.1), which is what the
// legacy scenarios tools-call-sampling, tools-call-elicitation,
// elicitation-sep1034-defaults and elicitation-sep1330-enums check.

type promptArgs struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
}

type messageArgs struct {
	Message string `json:"message" jsonschema:"The message to show the user"`
}

// inputTool registers a tool without arguments that asks for client input.
func inputTool(s *server.Server, name, description string, h func(ctx context.Context, req *server.CallToolRequest) (string, error)) {
	server.AddTool(s, &server.Tool{Name: name, Description: description},
		func(ctx context.Context, req *server.CallToolRequest, _ struct{}) (*server.CallToolResult, any, error) {
			text, err := h(ctx, req)
			if err != nil {
				return nil, nil, err // ErrInputRequired, or a failure
			}
			return textResult(text), nil, nil
		})
}

// everythingInputTools registers the tools that ask the client for input.
// A handler returns the error Elicit, Sample or ListRoots gave it: in 2026
// the runtime turns ErrInputRequired into input_required (docs/protocol.md
// §12); in legacy eras it is a failure of the call.
func everythingInputTools(s *server.Server) {
	server.AddTool(s, &server.Tool{Name: "test_sampling", Description: "Tests server-initiated sampling (LLM completion request)"},
		func(ctx context.Context, _ *server.CallToolRequest, in promptArgs) (*server.CallToolResult, any, error) {
			r, err := server.Sample(ctx, "llm_response", sampling(in.Prompt, 100))
			if err != nil {
				return nil, nil, err
			}
			return textResult("LLM response: " + sampledText(r)), nil, nil
		})
	server.AddTool(s, &server.Tool{Name: "test_elicitation", Description: "Tests server-initiated elicitation (user input request)"},
		func(ctx context.Context, _ *server.CallToolRequest, in messageArgs) (*server.CallToolResult, any, error) {
			r, err := server.Elicit(ctx, "user_response", server.ElicitParams{Message: in.Message, RequestedSchema: json.RawMessage(
				`{"type":"object","properties":{"username":{"type":"string","description":"User's response"},` +
					`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`)})
			if err != nil {
				return nil, nil, err
			}
			return textResult("User response: " + describe(r)), nil, nil
		})
	inputTool(s, "test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			r, err := server.Elicit(ctx, "defaults", server.ElicitParams{Message: "Please review and update the form fields with defaults",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{` +
					`"name":{"type":"string","description":"User name","default":"John Doe"},` +
					`"age":{"type":"integer","description":"User age","default":30},` +
					`"score":{"type":"number","description":"User score","default":95.5},` +
					`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},` +
					`"verified":{"type":"boolean","description":"Verification status","default":true}},"required":[]}`)})
			if err != nil {
				return "", err
			}
			return "Elicitation completed: " + describe(r), nil
		})
	inputTool(s, "test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			titled := `[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]`
			r, err := server.Elicit(ctx, "enums", server.ElicitParams{Message: "Please select options from the enum fields",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{` +
					`"untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},` +
					`"titledSingle":{"type":"string","description":"Select one option with titles","oneOf":` + titled + `},` +
					`"legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},` +
					`"untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},` +
					`"titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":` + titled + `}}},"required":[]}`)})
			if err != nil {
				return "", err
			}
			return "Elicitation completed: " + describe(r), nil
		})
	inputTool(s, "test_missing_capability", "Requires the sampling client capability: without it the call fails with -32021 (SEP-2575)",
		func(ctx context.Context, req *server.CallToolRequest) (string, error) {
			if declares(req.ClientCapabilities, "sampling") {
				return "Client declared the sampling capability; tool executed.", nil
			}
			// Asking for sampling the client did not declare: -32021.
			_, err := server.Sample(ctx, "capability_probe", sampling("Are you there?", 10))
			return "", err
		})

	// MRTR (SEP-2322): the test_input_required_result_* scenarios.
	inputTool(s, "test_input_required_result_elicitation", "MRTR (SEP-2322): asks for the caller name via an in-band elicitation request",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			r, err := server.Elicit(ctx, "user_name", nameQuestion("What is your name?"))
			if err != nil {
				return "", err
			}
			if name := contentString(r, "name"); name != "" {
				return "Hello, " + name + "!", nil
			}
			return "No name given (action=" + r.Action + ")", nil
		})
	inputTool(s, "test_input_required_result_sampling", "MRTR (SEP-2322): asks for an LLM completion via an in-band sampling request",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			r, err := server.Sample(ctx, "capital_question", sampling("What is the capital of France?", 100))
			if err != nil {
				return "", err
			}
			return "Sampling response: " + sampledText(r), nil
		})
	inputTool(s, "test_input_required_result_list_roots", "MRTR (SEP-2322): asks for the client roots via an in-band roots/list request",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			r, err := server.ListRoots(ctx, "client_roots")
			if err != nil {
				return "", err
			}
			uris := make([]string, len(r.Roots))
			for i, root := range r.Roots {
				uris[i] = root.URI
			}
			return fmt.Sprintf("Client exposed %d root(s): %s", len(r.Roots), strings.Join(uris, ", ")), nil
		})
	confirm := func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
		r, err := server.Elicit(ctx, "confirm", server.ElicitParams{Message: "Please confirm", RequestedSchema: formSchema("ok", "boolean")})
		if err != nil {
			return "", err
		}
		return "state-ok: requestState received and confirmation answered: " + r.Action, nil
	}
	inputTool(s, "test_input_required_result_request_state", "MRTR (SEP-2322): round-trips the integrity-protected requestState alongside an elicitation request", confirm)
	inputTool(s, "test_input_required_result_tampered_state", "MRTR (SEP-2322): retries whose requestState fails integrity verification are refused", confirm)
	inputTool(s, "test_input_required_result_multiple_inputs", "MRTR (SEP-2322): asks for elicitation, sampling and roots input in a single round",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			name, err1 := server.Elicit(ctx, "user_name", nameQuestion("What is your name?"))
			greeting, err2 := server.Sample(ctx, "greeting", sampling("Generate a greeting", 50))
			roots, err3 := server.ListRoots(ctx, "client_roots")
			if err := errors.Join(err1, err2, err3); err != nil {
				return "", err // all three are asked for in one round
			}
			return fmt.Sprintf("%s %s — %d root(s) visible", sampledText(greeting), contentString(name, "name"), len(roots.Roots)), nil
		})
	inputTool(s, "test_input_required_result_multi_round", "MRTR (SEP-2322): two elicitation rounds before completing",
		func(ctx context.Context, _ *server.CallToolRequest) (string, error) {
			first, err := server.Elicit(ctx, "step1", nameQuestion("Step 1: What is your name?"))
			if err != nil {
				return "", err
			}
			second, err := server.Elicit(ctx, "step2", server.ElicitParams{Message: "Step 2: What is your favorite color?",
				RequestedSchema: formSchema("color", "string")})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Multi-round complete: %s likes %s", contentString(first, "name"), contentString(second, "color")), nil
		})
	inputTool(s, "test_input_required_result_capabilities", "MRTR (SEP-2322): asks only for the input kinds the declared client capabilities cover",
		func(ctx context.Context, req *server.CallToolRequest) (string, error) {
			var errs []error
			asked := false
			if declares(req.ClientCapabilities, "elicitation") {
				_, err := server.Elicit(ctx, "user_name", nameQuestion("What is your name?"))
				errs, asked = append(errs, err), true
			}
			if declares(req.ClientCapabilities, "sampling") {
				_, err := server.Sample(ctx, "greeting", sampling("Generate a short greeting", 50))
				errs, asked = append(errs, err), true
			}
			if declares(req.ClientCapabilities, "roots") {
				_, err := server.ListRoots(ctx, "client_roots")
				errs, asked = append(errs, err), true
			}
			if err := errors.Join(errs...); err != nil {
				return "", err
			}
			if !asked {
				return "No declared client capability supports an in-band input request", nil
			}
			return "Capability-aware input requests fulfilled", nil
		})
}

// sampling is a one-message sampling request.
func sampling(prompt string, maxTokens int) server.CreateMessageParams {
	return server.CreateMessageParams{MaxTokens: maxTokens,
		Messages: []server.SamplingMessage{{Role: "user", Content: server.TextContent(prompt)}}}
}

// sampledText is the first text block the model produced.
func sampledText(r *server.CreateMessageResult) string {
	raw := bytes.TrimSpace(r.Content)
	if len(raw) > 0 && raw[0] == '{' {
		raw = slices.Concat([]byte("["), raw, []byte("]"))
	}
	var blocks []struct{ Type, Text string }
	_ = json.Unmarshal(raw, &blocks)
	for _, b := range blocks {
		if b.Type == "text" {
			return b.Text
		}
	}
	return "(non-text response)"
}

// formSchema is a form with one required field.
func formSchema(field, typ string) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` + strconv.Quote(field) + `:{"type":` + strconv.Quote(typ) +
		`}},"required":[` + strconv.Quote(field) + `]}`)
}

func nameQuestion(message string) server.ElicitParams {
	return server.ElicitParams{Message: message, RequestedSchema: formSchema("name", "string")}
}

// contentString is the string field of an accepted form, or "".
func contentString(r *server.ElicitResult, field string) string {
	if r == nil || r.Action != "accept" {
		return ""
	}
	s, _ := r.Content[field].(string)
	return s
}

// describe renders an elicitation answer as the fixture does.
func describe(r *server.ElicitResult) string {
	content := r.Content
	if content == nil {
		content = map[string]any{}
	}
	b, err := json.Marshal(content)
	if err != nil {
		b = []byte("{}")
	}
	return "action=" + r.Action + ", content=" + string(b)
}

// declares reports whether the client capabilities object declares name.
func declares(caps json.RawMessage, name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(caps, &m) != nil {
		return false
	}
	v := bytes.TrimSpace(m[name])
	return len(v) > 0 && v[0] == '{'
}
