package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/snodod/snodod/protocol"
)

var formParams = ElicitParams{Message: "Pick one", RequestedSchema: map[string]any{"type": "object"}}

// answering runs ask under a 2026 context whose answer for key "choice" is
// raw (no answer when raw is ""), and returns its error and the inputs.
func answering(raw string, ask func(ctx context.Context) error) (*inputs, error) {
	var responses map[string]json.RawMessage
	if raw != "" {
		responses = map[string]json.RawMessage{"choice": json.RawMessage(raw)}
	}
	ctx, in := withInputs(context.Background(), responses)
	err := ask(ctx)
	return in, err
}

func TestInputElicitAnswers(t *testing.T) {
	form := func(ctx context.Context) error { _, err := Elicit(ctx, "choice", formParams); return err }
	url := func(ctx context.Context) error {
		_, err := Elicit(ctx, "choice", ElicitParams{Mode: "url", Message: "Sign in", URL: "https://x.test/", ElicitationID: "e1"})
		return err
	}
	tests := []struct {
		name   string
		ask    func(context.Context) error
		answer string
		valid  bool
	}{
		{"accept with a string", form, `{"action":"accept","content":{"label":"chosen"}}`, true},
		{"accept with every value type", form,
			`{"action":"accept","content":{"s":"x","n":-1.5e3,"i":2,"b":true,"f":false,"l":["a","b"],"e":[]}}`, true},
		{"accept with an empty form", form, `{"action":"accept","content":{}}`, true},
		{"decline", form, `{"action":"decline"}`, true},
		{"cancel", form, `{"action":"cancel"}`, true},
		{"extra members are ignored", form, `{"action":"decline","_meta":{"x":1},"other":[1]}`, true},
		{"url accept without content", url, `{"action":"accept"}`, true},
		{"action maybe", form, `{"action":"maybe","content":{"label":"chosen"}}`, false},
		{"no action", form, `{"content":{"label":"chosen"}}`, false},
		{"action not a string", form, `{"action":1}`, false},
		{"action null", form, `{"action":null}`, false},
		{"label an object", form, `{"action":"accept","content":{"label":{"text":"chosen"}}}`, false},
		{"label null", form, `{"action":"accept","content":{"label":null}}`, false},
		{"label a list of numbers", form, `{"action":"accept","content":{"label":[1,2]}}`, false},
		{"label a mixed list", form, `{"action":"accept","content":{"label":["a",1]}}`, false},
		{"label a list of lists", form, `{"action":"accept","content":{"label":[["a"]]}}`, false},
		{"content a string", form, `{"action":"accept","content":"chosen"}`, false},
		{"content a list", form, `{"action":"accept","content":["chosen"]}`, false},
		{"content null", form, `{"action":"accept","content":null}`, false},
		{"form accept without content", form, `{"action":"accept"}`, false},
		{"wrapped in result", form, `{"result":{"action":"accept","content":{"label":"chosen"}}}`, false},
		{"not an object", form, `"accept"`, false},
		{"url wrapped in result", url, `{"result":{"action":"accept"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := answering(tt.answer, tt.ask)
			if tt.valid {
				if err != nil || in.invalid() != "" || in.requested() != nil {
					t.Fatalf("err %v, invalid %q, requested %v", err, in.invalid(), in.requested())
				}
				return
			}
			if !errors.Is(err, errInvalidInput) || errors.Is(err, ErrInputRequired) {
				t.Fatalf("err %v, want errInvalidInput", err)
			}
			if in.invalid() != "choice" || in.requested() != nil {
				t.Fatalf("invalid %q, requested %v", in.invalid(), in.requested())
			}
		})
	}
}

func TestInputElicitResult(t *testing.T) {
	ctx, _ := withInputs(context.Background(), map[string]json.RawMessage{
		"choice": json.RawMessage(`{"action":"accept","content":{"label":"chosen","n":2,"l":["a"]}}`),
	})
	got, err := Elicit(ctx, "choice", formParams)
	if err != nil {
		t.Fatal(err)
	}
	want := &ElicitResult{Action: "accept", Content: map[string]any{"label": "chosen", "n": 2.0, "l": []any{"a"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestInputMissingAnswer(t *testing.T) {
	ctx, in := withInputs(context.Background(), map[string]json.RawMessage{
		"answered": json.RawMessage(`{"action":"decline"}`),
		"unasked":  json.RawMessage(`{"garbage":true}`), // keys not asked are ignored
	})
	if _, err := Elicit(ctx, "answered", formParams); err != nil {
		t.Fatalf("answered: %v", err)
	}
	_, err := Elicit(ctx, "choice", formParams)
	if !errors.Is(err, ErrInputRequired) {
		t.Fatalf("missing answer: %v, want ErrInputRequired", err)
	}
	wrapped := fmt.Errorf("tool: %w", err)
	if !errors.Is(wrapped, ErrInputRequired) {
		t.Fatal("wrapping lost ErrInputRequired")
	}
	if _, err := Sample(ctx, "draft", CreateMessageParams{MaxTokens: 10}); !errors.Is(err, ErrInputRequired) {
		t.Fatalf("sample: %v", err)
	}
	if _, err := ListRoots(ctx, "roots"); !errors.Is(err, ErrInputRequired) {
		t.Fatalf("roots: %v", err)
	}
	if in.invalid() != "" {
		t.Fatalf("invalid %q", in.invalid())
	}
	got := jsonOf(t, in.requested())
	want := `{"choice":{"method":"elicitation/create","params":{"message":"Pick one","requestedSchema":{"type":"object"}}},` +
		`"draft":{"method":"sampling/createMessage","params":{"messages":null,"maxTokens":10}},` +
		`"roots":{"method":"roots/list","params":{}}}`
	if got != want {
		t.Fatalf("requested\n got %s\nwant %s", got, want)
	}
}

func TestInputSampleAndRootsAnswers(t *testing.T) {
	sample := func(ctx context.Context) error {
		_, err := Sample(ctx, "choice", CreateMessageParams{MaxTokens: 5})
		return err
	}
	roots := func(ctx context.Context) error { _, err := ListRoots(ctx, "choice"); return err }
	tests := []struct {
		name   string
		ask    func(context.Context) error
		answer string
		valid  bool
	}{
		{"sampling", sample, `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","stopReason":"endTurn"}`, true},
		{"sampling with a content list", sample, `{"role":"assistant","content":[{"type":"text","text":"hi"}],"model":"m"}`, true},
		{"sampling without role", sample, `{"content":{"type":"text","text":"hi"},"model":"m"}`, false},
		{"sampling without content", sample, `{"role":"assistant","model":"m"}`, false},
		{"sampling content a string", sample, `{"role":"assistant","content":"hi","model":"m"}`, false},
		{"sampling without model", sample, `{"role":"assistant","content":{"type":"text","text":"hi"}}`, false},
		{"sampling model not a string", sample, `{"role":"assistant","content":{"type":"text"},"model":1}`, false},
		{"sampling wrapped", sample, `{"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`, false},
		{"roots", roots, `{"roots":[{"uri":"file:///a","name":"a"},{"uri":"file:///b"}]}`, true},
		{"no roots", roots, `{"roots":[]}`, true},
		{"roots missing", roots, `{}`, false},
		{"roots not a list", roots, `{"roots":{"uri":"file:///a"}}`, false},
		{"root not an object", roots, `{"roots":["file:///a"]}`, false},
		{"root without uri", roots, `{"roots":[{"name":"a"}]}`, false},
		{"root uri not a string", roots, `{"roots":[{"uri":1}]}`, false},
		{"roots wrapped", roots, `{"result":{"roots":[]}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := answering(tt.answer, tt.ask)
			if tt.valid != (err == nil) || tt.valid != (in.invalid() == "") {
				t.Fatalf("err %v, invalid %q", err, in.invalid())
			}
		})
	}

	ctx, _ := withInputs(context.Background(), map[string]json.RawMessage{
		"s": json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`),
		"r": json.RawMessage(`{"roots":[{"uri":"file:///a","name":"a"}]}`),
	})
	s, err := Sample(ctx, "s", CreateMessageParams{})
	if err != nil || s.Role != "assistant" || s.Model != "m" || string(s.Content) != `{"type":"text","text":"hi"}` {
		t.Fatalf("sample %+v, %v", s, err)
	}
	r, err := ListRoots(ctx, "r")
	if err != nil || !reflect.DeepEqual(r.Roots, []Root{{URI: "file:///a", Name: "a"}}) {
		t.Fatalf("roots %+v, %v", r, err)
	}
}

func TestInputInvalidIsFirstKey(t *testing.T) {
	ctx, in := withInputs(context.Background(), map[string]json.RawMessage{
		"a": json.RawMessage(`{"action":"maybe"}`),
		"b": json.RawMessage(`{"action":"maybe"}`),
	})
	_, _ = Elicit(ctx, "a", formParams)
	_, _ = Elicit(ctx, "b", formParams)
	if in.invalid() != "a" {
		t.Fatalf("invalid %q, want a", in.invalid())
	}
}

func TestInputUnsupported(t *testing.T) {
	// A legacy request whose transport cannot reach the client, and a
	// context the runtime did not make.
	noRequester := withLegacy(context.Background(), NewSessionState(0))
	for name, ctx := range map[string]context.Context{"legacy without a requester": noRequester, "no runtime": context.Background()} {
		if _, err := Elicit(ctx, "choice", formParams); !errors.Is(err, errInputUnsupported) || errors.Is(err, ErrInputRequired) {
			t.Errorf("%s elicit: %v", name, err)
		}
		if _, err := Sample(ctx, "choice", CreateMessageParams{}); !errors.Is(err, errInputUnsupported) {
			t.Errorf("%s sample: %v", name, err)
		}
		if _, err := ListRoots(ctx, "choice"); !errors.Is(err, errInputUnsupported) {
			t.Errorf("%s roots: %v", name, err)
		}
	}
}

func TestInputConcurrentAsks(t *testing.T) {
	ctx, in := withInputs(context.Background(), nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _, _ = Elicit(ctx, fmt.Sprint("k", i), formParams) })
	}
	wg.Wait()
	if n := len(in.requested()); n != 50 {
		t.Fatalf("%d requested, want 50", n)
	}
}

func TestInputMissingCapabilities(t *testing.T) {
	elicit := InputRequest{Method: "elicitation/create", Params: formParams}
	elicitForm := InputRequest{Method: "elicitation/create", Params: ElicitParams{Mode: "form", Message: "m"}}
	elicitURL := InputRequest{Method: "elicitation/create", Params: &ElicitParams{Mode: "url", Message: "m", URL: "https://x.test"}}
	elicitRawURL := InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{"mode":"url","message":"m"}`)}
	sample := InputRequest{Method: "sampling/createMessage", Params: CreateMessageParams{MaxTokens: 1}}
	sampleTools := InputRequest{Method: "sampling/createMessage", Params: &CreateMessageParams{Tools: []any{map[string]any{"name": "t"}}}}
	sampleMapTools := InputRequest{Method: "sampling/createMessage", Params: map[string]any{"tools": []any{map[string]any{"name": "t"}}}}
	roots := InputRequest{Method: "roots/list"}
	tests := []struct {
		name string
		reqs []InputRequest
		caps string
		want string // "" for nil
	}{
		{"form with elicitation {}", []InputRequest{elicit}, `{"elicitation":{}}`, ""},
		{"form with elicitation.form", []InputRequest{elicitForm}, `{"elicitation":{"form":{}}}`, ""},
		{"form with form and url", []InputRequest{elicit}, `{"elicitation":{"form":{},"url":{}}}`, ""},
		{"form without elicitation", []InputRequest{elicit}, `{}`, `{"elicitation":{}}`},
		{"form with url only", []InputRequest{elicitForm}, `{"elicitation":{"url":{}}}`, `{"elicitation":{}}`},
		{"form with elicitation null", []InputRequest{elicit}, `{"elicitation":null}`, `{"elicitation":{}}`},
		{"url with url", []InputRequest{elicitURL}, `{"elicitation":{"url":{}}}`, ""},
		{"url with elicitation {}", []InputRequest{elicitURL}, `{"elicitation":{}}`, `{"elicitation":{"url":{}}}`},
		{"url from raw params", []InputRequest{elicitRawURL}, `{"elicitation":{"form":{}}}`, `{"elicitation":{"url":{}}}`},
		{"form and url missing merge", []InputRequest{elicit, elicitURL}, `{}`, `{"elicitation":{"url":{}}}`},
		{"sampling", []InputRequest{sample}, `{"sampling":{}}`, ""},
		{"sampling missing", []InputRequest{sample}, `{"elicitation":{}}`, `{"sampling":{}}`},
		{"sampling tools", []InputRequest{sampleTools}, `{"sampling":{"tools":{}}}`, ""},
		{"sampling tools missing", []InputRequest{sampleTools}, `{"sampling":{}}`, `{"sampling":{"tools":{}}}`},
		{"sampling tools from a map", []InputRequest{sampleMapTools}, `{"sampling":{}}`, `{"sampling":{"tools":{}}}`},
		{"sampling both missing merge", []InputRequest{sample, sampleTools}, `{}`, `{"sampling":{"tools":{}}}`},
		{"roots", []InputRequest{roots}, `{"roots":{"listChanged":true}}`, ""},
		{"roots missing", []InputRequest{roots}, `{}`, `{"roots":{}}`},
		{"everything missing", []InputRequest{elicit, sample, roots}, `{}`, `{"elicitation":{},"roots":{},"sampling":{}}`},
		{"only what is missing", []InputRequest{elicit, sample, roots}, `{"sampling":{},"roots":{}}`, `{"elicitation":{}}`},
		{"capabilities absent", []InputRequest{roots}, ``, `{"roots":{}}`},
		{"nothing asked", nil, `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := map[string]InputRequest{}
			for i, r := range tt.reqs {
				reqs[fmt.Sprint("k", i)] = r
			}
			var caps json.RawMessage
			if tt.caps != "" {
				caps = json.RawMessage(tt.caps)
			}
			got := missingCapabilities(reqs, caps)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("got %s, want nil", jsonOf(t, got))
				}
				return
			}
			if s := jsonOf(t, got); s != tt.want {
				t.Fatalf("got %s, want %s", s, tt.want)
			}
		})
	}
	e := missingCapabilityReply(map[string]any{"elicitation": map[string]any{}})
	line := string(protocol.AppendError(nil, protocol.StringID("1"), e))
	want := `{"jsonrpc":"2.0","id":"1","error":{"code":-32021,"message":"Missing required client capability",` +
		`"data":{"requiredCapabilities":{"elicitation":{}}}}}` + "\n"
	if line != want {
		t.Fatalf("error line\n got %s\nwant %s", line, want)
	}
}

func TestInputDecodeRetry(t *testing.T) {
	tests := []struct {
		params    string
		responses string // JSON of the responses, "null" for nil
		state     string // "-" for absent
		err       *protocol.Error
	}{
		{``, `null`, "-", nil},
		{`{}`, `null`, "-", nil},
		{`{"name":"needs_choice","arguments":{}}`, `null`, "-", nil},
		{`{"requestState":"abc"}`, `null`, "abc", nil},
		{`{"inputResponses":{},"requestState":""}`, `{}`, "", nil},
		{`{"inputResponses":{"choice":{"action":"accept"},"x":{}}}`, `{"choice":{"action":"accept"},"x":{}}`, "-", nil},
		{`{"requestState":null}`, ``, ``, errStateNotString},
		{`{"requestState":{}}`, ``, ``, errStateNotString},
		{`{"requestState":1}`, ``, ``, errStateNotString},
		{`{"requestState":["a"]}`, ``, ``, errStateNotString},
		{`{"inputResponses":null}`, ``, ``, errResponsesNotObjects},
		{`{"inputResponses":[]}`, ``, ``, errResponsesNotObjects},
		{`{"inputResponses":"x"}`, ``, ``, errResponsesNotObjects},
		{`{"inputResponses":{"choice":1}}`, ``, ``, errResponsesNotObjects},
		{`{"inputResponses":{"choice":null}}`, ``, ``, errResponsesNotObjects},
		{`{"inputResponses":{"choice":[]}}`, ``, ``, errResponsesNotObjects},
		{`{"inputResponses":{"a":{},"choice":"s"}}`, ``, ``, errResponsesNotObjects},
	}
	for _, tt := range tests {
		t.Run(tt.params, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			top, ok := protocol.SplitObject(nil, params)
			if !ok && len(params) > 0 {
				t.Fatalf("params %s are not an object", params)
			}
			responses, state, err := decodeRetry(top)
			if err != tt.err {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if got := jsonOf(t, responses); got != tt.responses {
				t.Fatalf("responses %s, want %s", got, tt.responses)
			}
			switch {
			case tt.state == "-" && state != nil:
				t.Fatalf("state %q, want absent", *state)
			case tt.state != "-" && (state == nil || *state != tt.state):
				t.Fatalf("state %v, want %q", state, tt.state)
			}
		})
	}
	for _, e := range []*protocol.Error{errStateNotString, errResponsesNotObjects, invalidInputReply("choice")} {
		if e.Code != protocol.CodeInvalidParams {
			t.Errorf("%q: code %d", e.Message, e.Code)
		}
	}
	if m := invalidInputReply("choice").Message; m != "Invalid input response: choice" {
		t.Errorf("message %q", m)
	}
}

// withInputs returns a context whose handler's Elicit, Sample and
// ListRoots read their answers from responses, as the runtime's
// callContext gives a request of a method that may ask.
func withInputs(ctx context.Context, responses map[string]json.RawMessage) (context.Context, *inputs) {
	in := &inputs{responses: responses}
	return context.WithValue(ctx, inputsKey{}, in), in
}

// withLegacy marks ctx as a legacy request of sess, as the runtime's
// callContext does.
func withLegacy(ctx context.Context, sess *SessionState) context.Context {
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	return context.WithValue(ctx, legacyKey{}, &legacyCall{sess: sess, notifier: n})
}
