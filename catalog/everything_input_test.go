package catalog_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
)

// mrtrResult is a tools/call or prompts/get result of a 2026 round.
type mrtrResult struct {
	toolResult
	Messages []struct {
		Role    string
		Content struct{ Type, Text string }
	}
}

// methods returns "key:method" for each input request, sorted.
func (r mrtrResult) methods() []string {
	var out []string
	for k, ir := range r.InputRequests {
		out = append(out, k+":"+ir.Method)
	}
	slices.Sort(out)
	return out
}

// round sends one round of a 2026 tools/call (or prompts/get when prompt
// is set) of name, with the answers and the state of the previous round.
func round(t *testing.T, c *client, name string, prompt bool, answers map[string]any, state string) (mrtrResult, *protocol.Error) {
	t.Helper()
	args := toolArgs[name]
	if args == nil {
		args = map[string]any{}
	}
	method, params := "tools/call", map[string]any{"name": name, "arguments": args}
	if prompt {
		method, params = "prompts/get", map[string]any{"name": name}
	}
	if answers != nil {
		params["inputResponses"] = answers
	}
	if state != "" {
		params["requestState"] = state
	}
	raw, perr := c.call(t.Context(), method, params)
	if perr != nil {
		return mrtrResult{}, perr
	}
	var r mrtrResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %s: %v", name, raw, err)
	}
	return r, nil
}

func accept(content map[string]any) map[string]any {
	return map[string]any{"action": "accept", "content": content}
}

// toolArgs are the arguments of the tools that have some.
var toolArgs = map[string]map[string]any{
	"test_sampling":    {"prompt": "What is the capital of France?"},
	"test_elicitation": {"message": "Who are you?"},
}

var (
	sampled = map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "Paris"}, "model": "test-model"}
	roots   = map[string]any{"roots": []any{map[string]any{"uri": "file:///test/root", "name": "Test Root"}}}
)

// TestEverythingInputRequired runs the conformance suite's
// input-required-result scenarios (SEP-2322) through Dispatch.
func TestEverythingInputRequired(t *testing.T) {
	s := newServer(t, catalog.Everything)
	all := `{"elicitation":{},"sampling":{},"roots":{}}`
	tests := []struct {
		name, caps string
		prompt     bool
		asks       []string       // the first round's input requests
		answers    map[string]any // the second round's
		text       string         // the complete result's text
	}{
		{"test_input_required_result_elicitation", all, false, []string{"user_name:elicitation/create"},
			map[string]any{"user_name": accept(map[string]any{"name": "Alice"})}, "Hello, Alice!"},
		{"test_input_required_result_sampling", all, false, []string{"capital_question:sampling/createMessage"},
			map[string]any{"capital_question": sampled}, "Sampling response: Paris"},
		{"test_input_required_result_list_roots", all, false, []string{"client_roots:roots/list"},
			map[string]any{"client_roots": roots}, "Client exposed 1 root(s): file:///test/root"},
		{"test_input_required_result_request_state", all, false, []string{"confirm:elicitation/create"},
			map[string]any{"confirm": accept(map[string]any{"ok": true})}, "state-ok: requestState received and confirmation answered: accept"},
		{"test_input_required_result_multiple_inputs", all, false,
			[]string{"client_roots:roots/list", "greeting:sampling/createMessage", "user_name:elicitation/create"},
			map[string]any{"user_name": accept(map[string]any{"name": "Alice"}), "greeting": sampled, "client_roots": roots},
			"Paris Alice — 1 root(s) visible"},
		{"test_input_required_result_capabilities", `{"sampling":{}}`, false, []string{"greeting:sampling/createMessage"},
			map[string]any{"greeting": sampled}, "Capability-aware input requests fulfilled"},
		{"test_elicitation", all, false, []string{"user_response:elicitation/create"},
			map[string]any{"user_response": accept(map[string]any{"username": "u", "email": "e@x"})},
			`User response: action=accept, content={"email":"e@x","username":"u"}`},
		{"test_sampling", all, false, []string{"llm_response:sampling/createMessage"},
			map[string]any{"llm_response": sampled}, "LLM response: Paris"},
		{"test_input_required_result_prompt", all, true, []string{"user_context:elicitation/create"},
			map[string]any{"user_context": accept(map[string]any{"context": "test context"})}, "Context: test context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, s, v2026, tt.caps)
			first, perr := round(t, c, tt.name, tt.prompt, nil, "")
			if perr != nil {
				t.Fatalf("round 1: %+v", perr)
			}
			if first.ResultType != "input_required" || !slices.Equal(first.methods(), tt.asks) || first.RequestState == "" {
				t.Fatalf("round 1: %+v, want input_required asking %q", first, tt.asks)
			}
			second, perr := round(t, c, tt.name, tt.prompt, tt.answers, first.RequestState)
			if perr != nil {
				t.Fatalf("round 2: %+v", perr)
			}
			got := ""
			if tt.prompt && len(second.Messages) == 1 {
				got = second.Messages[0].Content.Text
			} else if !tt.prompt && len(second.Content) == 1 {
				got = second.Content[0].Text
			}
			if second.ResultType != "complete" || got != tt.text {
				t.Errorf("round 2: %+v, want complete %q", second, tt.text)
			}
			// Without the answers the input is asked for again.
			again, perr := round(t, c, tt.name, tt.prompt, map[string]any{"wrong_key": accept(map[string]any{"x": "y"})}, "")
			if perr != nil || again.ResultType != "input_required" {
				t.Errorf("missing answers: %+v, %+v", again, perr)
			}
		})
	}
}

// TestEverythingMultiRound follows the conformance scenario
// input-required-result-multi-round: round 3 carries only step2's answer
// and the requestState of round 2.
func TestEverythingMultiRound(t *testing.T) {
	c := newClient(t, newServer(t, catalog.Everything), v2026, `{"elicitation":{}}`)
	const tool = "test_input_required_result_multi_round"
	r1, perr := round(t, c, tool, false, nil, "")
	if perr != nil || !slices.Equal(r1.methods(), []string{"step1:elicitation/create"}) || r1.RequestState == "" {
		t.Fatalf("round 1: %+v, %+v", r1, perr)
	}
	time.Sleep(2 * time.Millisecond) // a later expiry: a different requestState
	r2, perr := round(t, c, tool, false, map[string]any{"step1": accept(map[string]any{"name": "Alice"})}, r1.RequestState)
	if perr != nil || !slices.Equal(r2.methods(), []string{"step2:elicitation/create"}) || r2.RequestState == r1.RequestState {
		t.Fatalf("round 2: %+v, %+v", r2, perr)
	}
	r3, perr := round(t, c, tool, false, map[string]any{"step2": accept(map[string]any{"color": "blue"})}, r2.RequestState)
	if perr != nil || r3.ResultType != "complete" || !strings.HasSuffix(r3.text(t), "likes blue") {
		t.Errorf("round 3: resultType %q asking %q, error %v; want complete (the runtime must carry step1's answer across rounds)",
			r3.ResultType, r3.methods(), perr)
	}
}

func TestEverythingInputErrors(t *testing.T) {
	s := newServer(t, catalog.Everything)
	c := newClient(t, s, v2026, `{"elicitation":{}}`)

	first, _ := round(t, c, "test_input_required_result_tampered_state", false, nil, "")
	if _, perr := round(t, c, "test_input_required_result_tampered_state", false,
		map[string]any{"confirm": accept(map[string]any{"ok": true})}, first.RequestState+"-TAMPERED"); !errIs(perr, protocol.CodeInvalidParams, "Invalid requestState") {
		t.Errorf("tampered state: %+v", perr)
	}
	if _, perr := round(t, c, "test_input_required_result_elicitation", false,
		map[string]any{"user_name": 12345}, ""); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Errorf("answer 12345: %+v, want -32602", perr)
	}
	if _, perr := round(t, c, "test_input_required_result_elicitation", false,
		map[string]any{"user_name": map[string]any{"action": "maybe"}}, ""); !errIs(perr, protocol.CodeInvalidParams, "Invalid input response: user_name") {
		t.Errorf("action maybe: %+v", perr)
	}

	// test_missing_capability needs sampling (SEP-2575).
	if _, perr := round(t, c, "test_missing_capability", false, nil, ""); !errIs(perr, protocol.CodeMissingCapability, "Missing required client capability") ||
		mustJSON(t, perr.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
		t.Errorf("missing capability: %+v", perr)
	}
	sampling := newClient(t, s, v2026, `{"sampling":{}}`)
	if r, perr := round(t, sampling, "test_missing_capability", false, nil, ""); perr != nil || r.text(t) != "Client declared the sampling capability; tool executed." {
		t.Errorf("declared sampling: %+v, %+v", r, perr)
	}
	if r, perr := round(t, newClient(t, s, v2026, `{}`), "test_input_required_result_capabilities", false, nil, ""); perr != nil ||
		r.text(t) != "No declared client capability supports an in-band input request" {
		t.Errorf("no capabilities: %+v, %+v", r, perr)
	}

	// Legacy eras cannot ask for input (docs/protocol.md §4.2 step 8).
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		legacy := newClient(t, s, version, `{"elicitation":{},"sampling":{},"roots":{}}`)
		for tool, args := range map[string]map[string]any{
			"test_input_required_result_elicitation": {},
			"test_input_required_result_prompt":      nil, // a prompt
			"test_sampling":                          {"prompt": "p"},
			"test_elicitation":                       {"message": "m"},
		} {
			method, params := "tools/call", map[string]any{"name": tool, "arguments": args}
			if args == nil {
				method, params = "prompts/get", map[string]any{"name": tool}
			}
			if _, perr := legacy.call(t.Context(), method, params); !errIs(perr, protocol.CodeInternalError, "Input requests are not supported in this protocol version") {
				t.Errorf("%s %s: %+v", version, tool, perr)
			}
		}
	}
}
