package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/snodod/snodod/protocol"
)

// This file holds client input as handlers see it. In a legacy request
// Elicit, Sample and ListRoots send the request to the client and wait for
// its answer (RequestClient, clientrequest.go). In 2026 they are
// multi-round-trip requests (docs/protocol.md §12): they either return the
// client's answer carried by this round of the request, or
// ErrInputRequired, which the handler returns so the runtime can answer
// input_required. The runtime
// keeps no state between rounds: answers arrive in the retry's
// inputResponses, and the request they answer is bound by the signed
// requestState (signer.state, in cursor.go).

// InputRequest is one request for client input: Method is
// "elicitation/create", "sampling/createMessage" or "roots/list"; Params
// its params.
type InputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// ErrInputRequired is returned (wrapped) by Elicit, Sample and ListRoots
// when the request carries no answer for the key yet. A handler returns it,
// or any error wrapping it, and the runtime answers input_required asking
// for every input requested so far in this round. It is not a failure the
// client sees.
var ErrInputRequired = errors.New("input required")

// errInputUnsupported is wrapped by Elicit, Sample and ListRoots outside a
// 2026 tools/call, prompts/get or resources/read, and by RequestClient in a
// legacy request whose transport cannot reach the client; the runtime
// answers -32603 "Input requests are not supported in this protocol
// version" (legacy eras) or "Internal error" (other methods, docs/protocol.md
// §12.1).
var errInputUnsupported = errors.New("input requests are not supported here")

// errInvalidInput is wrapped by Elicit, Sample and ListRoots for an answer
// that does not fit its request; the runtime answers invalidInputReply.
var errInvalidInput = errors.New("input response does not fit its request")

// Errors the runtime answers for multi-round-trip requests (docs/protocol.md
// §12). They are shared values: never modify them.
var (
	errStateNotString = &protocol.Error{Code: protocol.CodeInvalidParams,
		Message: "requestState must be a string"}
	errResponsesNotObjects = &protocol.Error{Code: protocol.CodeInvalidParams,
		Message: "inputResponses must be an object of objects"}
)

// invalidInputReply is the error answered for an answer under key that does
// not fit its request (docs/protocol.md §12.3).
func invalidInputReply(key string) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid input response: " + key}
}

// missingCapabilityReply is the -32021 error of docs/protocol.md §12.2 for the
// merged requiredCapabilities returned by missingCapabilities.
func missingCapabilityReply(required map[string]any) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeMissingCapability, Message: "Missing required client capability",
		Data: map[string]any{"requiredCapabilities": required}}
}

// ElicitParams are the params of elicitation/create. Mode is "" or "form"
// (RequestedSchema describes the form) or "url" (URL and ElicitationID).
type ElicitParams struct {
	Mode            string `json:"mode,omitempty"`
	Message         string `json:"message"`
	RequestedSchema any    `json:"requestedSchema,omitempty"`
	URL             string `json:"url,omitempty"`
	ElicitationID   string `json:"elicitationId,omitempty"`
}

// ElicitResult is the client's answer to elicitation/create. Action is
// "accept", "decline" or "cancel"; Content holds the form's values (strings,
// float64 numbers, booleans and []any of strings) with "accept".
type ElicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// Elicit asks the client for input under key. decline and cancel are
// ordinary answers.
//
// In a legacy request it sends elicitation/create to the client and waits
// for the answer, at most until ctx ends (RequestClient: an undeclared
// capability is ErrMissingClientCapability and nothing is sent); an answer
// that does not fit (action, and content against p.RequestedSchema) is an
// error wrapping ErrInvalidClientResponse. In 2026 it returns the answer
// carried by this round of the request, or an error wrapping
// ErrInputRequired; key names the answer in inputRequests and
// inputResponses, and a handler uses one key per distinct question.
func Elicit(ctx context.Context, key string, p ElicitParams) (*ElicitResult, error) {
	var out ElicitResult
	err := askInput(ctx, key, InputRequest{Method: "elicitation/create", Params: p}, func(raw json.RawMessage) bool {
		return decodeElicitResult(raw, p.Mode == "url", &out) && fitsRequestedSchema(p.RequestedSchema, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SamplingMessage is one message of a sampling request.
type SamplingMessage struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content Content `json:"content"`
}

// CreateMessageParams are the params of sampling/createMessage. Tools (and
// ToolChoice) need the client's sampling.tools capability.
type CreateMessageParams struct {
	Messages         []SamplingMessage `json:"messages"`
	ModelPreferences any               `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	Metadata         map[string]any    `json:"metadata,omitempty"`
	Tools            []any             `json:"tools,omitempty"`
	ToolChoice       any               `json:"toolChoice,omitempty"`
}

// CreateMessageResult is the client's answer to sampling/createMessage.
// Content is the raw content block (or list of blocks) the model produced.
type CreateMessageResult struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Model      string          `json:"model"`
	StopReason string          `json:"stopReason,omitempty"`
}

// Sample asks the client to sample a model under key, as Elicit does.
func Sample(ctx context.Context, key string, p CreateMessageParams) (*CreateMessageResult, error) {
	var out CreateMessageResult
	err := askInput(ctx, key, InputRequest{Method: "sampling/createMessage", Params: p}, func(raw json.RawMessage) bool {
		return decodeSamplingResult(raw, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Root is one of the client's roots.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// ListRootsResult is the client's answer to roots/list.
type ListRootsResult struct {
	Roots []Root `json:"roots"`
}

// ListRoots asks the client for its roots under key, as Elicit does.
func ListRoots(ctx context.Context, key string) (*ListRootsResult, error) {
	var out ListRootsResult
	err := askInput(ctx, key, InputRequest{Method: "roots/list", Params: struct{}{}}, func(raw json.RawMessage) bool {
		return decodeRootsResult(raw, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// inputs is the per-request MRTR state the runtime puts in a handler's
// context. Handlers may ask for input from several goroutines.
type inputs struct {
	responses map[string]json.RawMessage

	mu    sync.Mutex
	asked map[string]InputRequest // asked and not answered in this round
	bad   string                  // first key whose answer did not fit
}

// inputsKey finds a request's inputs in its context: the runtime's
// callContext answers it for methods that may ask (mrtr), with the retry's
// inputResponses (nil on a first round). Without them (methods that may
// not ask, docs/protocol.md §12.1) Elicit, Sample and ListRoots fail with
// errInputUnsupported.
type inputsKey struct{}

// requested returns the inputs asked for and not answered in this round,
// or nil when there are none. The runtime answers input_required when it
// is non-nil and the handler failed with ErrInputRequired.
func (in *inputs) requested() map[string]InputRequest {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.asked) == 0 {
		return nil
	}
	return maps.Clone(in.asked)
}

// invalid returns the key of the first answer that did not fit its
// request, or "" when none did not. The runtime checks it before anything
// else the handler returned: it answers invalidInputReply(key).
func (in *inputs) invalid() string {
	if in == nil { // a legacy request: answers are not MRTR's
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.bad
}

// askInput gets the answer to r under key and decodes it with fit: in a
// legacy request from the client at once (RequestClient), in 2026 from
// this round's inputResponses.
func askInput(ctx context.Context, key string, r InputRequest, fit func(json.RawMessage) bool) error {
	if lc, _ := ctx.Value(legacyKey{}).(*legacyCall); lc != nil {
		raw, err := RequestClient(ctx, r.Method, r.Params)
		if err != nil {
			return fmt.Errorf("%s %q: %w", r.Method, key, err)
		}
		if !fit(raw) {
			return fmt.Errorf("%s %q: %w", r.Method, key, ErrInvalidClientResponse)
		}
		return nil
	}
	in, _ := ctx.Value(inputsKey{}).(*inputs)
	if in == nil {
		return fmt.Errorf("%s %q: %w", r.Method, key, errInputUnsupported)
	}
	raw, answered := in.responses[key]
	if answered && fit(raw) {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if answered {
		if in.bad == "" {
			in.bad = key
		}
		return fmt.Errorf("%s %q: %w", r.Method, key, errInvalidInput)
	}
	if in.asked == nil {
		in.asked = make(map[string]InputRequest)
	}
	in.asked[key] = r
	return fmt.Errorf("%s %q: %w", r.Method, key, ErrInputRequired)
}

// missingCapabilities checks requests against the request's
// clientCapabilities (docs/protocol.md §12.2). It returns nil when every needed
// capability is declared, else the merged requiredCapabilities object.
// Form elicitation is reported as {"elicitation":{}}, unlike the reference
// library's {"elicitation":{"form":{}}}.
func missingCapabilities(requests map[string]InputRequest, clientCaps json.RawMessage) map[string]any {
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(clientCaps, &caps) // not an object: nothing is declared
	declared := func(path ...string) bool {
		m := caps
		for i, name := range path {
			v, ok := m[name]
			if !ok || !isJSONObject(v) {
				return false
			}
			if i < len(path)-1 {
				m = nil
				if json.Unmarshal(v, &m) != nil {
					return false
				}
			}
		}
		return true
	}
	var missing map[string]any
	need := func(path ...string) {
		if missing == nil {
			missing = map[string]any{}
		}
		m := missing
		for _, name := range path {
			sub, _ := m[name].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				m[name] = sub
			}
			m = sub
		}
	}
	for _, r := range requests {
		switch r.Method {
		case "elicitation/create":
			if elicitMode(r.Params) == "url" {
				if !declared("elicitation", "url") {
					need("elicitation", "url")
				}
			} else if !declared("elicitation", "form") &&
				(!declared("elicitation") || declared("elicitation", "url")) {
				// {} counts as form; {"url":{}} alone does not.
				need("elicitation")
			}
		case "sampling/createMessage":
			if samplingWithTools(r.Params) {
				if !declared("sampling", "tools") {
					need("sampling", "tools")
				}
			} else if !declared("sampling") {
				need("sampling")
			}
		case "roots/list":
			if !declared("roots") {
				need("roots")
			}
		}
	}
	return missing
}

func elicitMode(params any) string {
	switch p := params.(type) {
	case ElicitParams:
		return p.Mode
	case *ElicitParams:
		return p.Mode
	}
	var m struct {
		Mode string `json:"mode"`
	}
	decodeAsJSON(params, &m)
	return m.Mode
}

func samplingWithTools(params any) bool {
	switch p := params.(type) {
	case CreateMessageParams:
		return len(p.Tools) > 0
	case *CreateMessageParams:
		return len(p.Tools) > 0
	}
	var m struct {
		Tools []json.RawMessage `json:"tools"`
	}
	decodeAsJSON(params, &m)
	return len(m.Tools) > 0
}

// decodeAsJSON decodes the JSON form of v into out, leaving out as it is on
// failure.
func decodeAsJSON(v any, out any) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return
		}
	}
	_ = json.Unmarshal(raw, out)
}

// decodeRetry reads the retry members of params (docs/protocol.md §12.3):
// inputResponses (nil when absent) and requestState (nil when absent). The
// state is not verified here; see signer.checkState.
func decodeRetry(params protocol.Object) (responses map[string]json.RawMessage, state *string, err *protocol.Error) {
	// A member whose value is null is present, and of the wrong type.
	if raw, ok := params.Get("requestState"); ok {
		s, ok := protocol.String(raw)
		if !ok {
			return nil, nil, errStateNotString
		}
		state = &s
	}
	if raw, ok := params.Get("inputResponses"); ok {
		if responses, ok = protocol.Members(raw); !ok {
			return nil, nil, errResponsesNotObjects
		}
		if responses == nil {
			responses = map[string]json.RawMessage{} // present, and empty
		}
		for _, v := range responses {
			if !isJSONObject(v) {
				return nil, nil, errResponsesNotObjects
			}
		}
	}
	return responses, state, nil
}
