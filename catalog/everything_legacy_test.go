package catalog_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/server"
)

// conformanceClient answers requests to the client as the conformance
// suite's legacy client does (connectToServer declares sampling and
// elicitation), recording what it was asked.
type conformanceClient struct {
	mu     sync.Mutex
	asked  []json.RawMessage
	answer json.RawMessage
}

func (c *conformanceClient) RequestClient(_ context.Context, method string, params any) (json.RawMessage, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, json.RawMessage(`{"method":"`+method+`","params":`+string(raw)+`}`))
	return c.answer, nil
}

// The conformance fixture's elicitation and sampling tools ask a legacy
// client directly (docs/protocol.md §3.1): the scenarios tools-call-elicitation,
// tools-call-sampling, elicitation-sep1034-defaults and
// elicitation-sep1330-enums check the request the client gets and the text
// the tool answers with its reply.
func TestEverythingLegacyClientRequests(t *testing.T) {
	s := newServer(t, catalog.Everything)
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		for _, tc := range []struct {
			tool, answer string
			args         map[string]any
			wantAsked    []string // substrings of the request sent
			wantText     string
		}{
			{"test_sampling", `{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"test-model"}`,
				map[string]any{"prompt": "What is the capital of France?"},
				[]string{`"method":"sampling/createMessage"`, `"text":"What is the capital of France?"`, `"maxTokens":100`},
				"LLM response: Paris"},
			{"test_elicitation", `{"action":"accept","content":{"username":"alice","email":"a@example.com"}}`,
				map[string]any{"message": "Who are you?"},
				[]string{`"method":"elicitation/create"`, `"message":"Who are you?"`, `"required":["username","email"]`},
				`User response: action=accept, content={"email":"a@example.com","username":"alice"}`},
			{"test_elicitation_sep1034_defaults", `{"action":"accept","content":{"name":"Jane Smith","age":25,"score":88.0,"status":"inactive","verified":false}}`,
				nil,
				[]string{`"default":"John Doe"`, `"default":30`, `"default":95.5`, `"default":"active"`, `"default":true`},
				`Elicitation completed: action=accept, content={"age":25,"name":"Jane Smith","score":88,"status":"inactive","verified":false}`},
			{"test_elicitation_sep1330_enums", `{"action":"accept","content":{"untitledSingle":"option1","titledSingle":"value1","legacyEnum":"opt1","untitledMulti":["option1","option2"],"titledMulti":["value1","value2"]}}`,
				nil,
				[]string{`"enumNames":["Option One","Option Two","Option Three"]`, `"oneOf":[{"const":"value1","title":"First Option"}`, `"anyOf":[{"const":"value1"`},
				`Elicitation completed: action=accept, content={"legacyEnum":"opt1"`},
		} {
			t.Run(version+"/"+tc.tool, func(t *testing.T) {
				c := newClient(t, s, version, `{"sampling":{},"elicitation":{}}`)
				peer := &conformanceClient{answer: json.RawMessage(tc.answer)}
				args := tc.args
				if args == nil {
					args = map[string]any{}
				}
				ctx := server.WithClientRequester(t.Context(), peer)
				r := result[toolResult](t, c, ctx, "tools/call", map[string]any{"name": tc.tool, "arguments": args})
				if r.IsError || len(r.Content) != 1 || !strings.HasPrefix(r.Content[0].Text, tc.wantText) {
					t.Errorf("result %+v, want text %q", r, tc.wantText)
				}
				if len(peer.asked) != 1 {
					t.Fatalf("the client was asked %d times, want once", len(peer.asked))
				}
				for _, want := range tc.wantAsked {
					if !strings.Contains(string(peer.asked[0]), want) {
						t.Errorf("the request %s lacks %s", peer.asked[0], want)
					}
				}
			})
		}
	}
}
