package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// reflective hides callToolWire's AppendJSON, to encode it the general way.
type reflective struct{ w callToolWire }

func (r reflective) MarshalJSON() ([]byte, error) {
	type plain callToolWire
	return protocol.AppendValue(nil, plain(r.w))
}

// The tool-result fast path writes exactly what the reflective encoder
// writes, for every kind of block and the strings that need escaping.
func TestToolResultAppendMatchesEncoder(t *testing.T) {
	prio := 0.5
	texts := []string{"", "plain", "héllo 日本 😀", "a\u2028b\u2029c", "<a&b>/", "quote\" back\\ nl\n tab\t ctl\x01", "bad \xff utf-8", strings.Repeat("x", 70000)}
	var results []callToolWire
	for _, s := range texts {
		results = append(results, callToolWire{Content: []Content{TextContent(s)}})
	}
	results = append(results,
		callToolWire{ResultType: "complete", Content: []Content{}, IsError: true, Meta: map[string]any{"io.modelcontextprotocol/serverInfo": protocol.Implementation{Name: "n", Version: "1"}}},
		callToolWire{ResultType: "complete", Content: []Content{TextContent("r")}, Meta: json.RawMessage(`{"io.modelcontextprotocol/serverInfo":{"name":"<n>","version":"1"}}`)},
		callToolWire{Content: []Content{ImageContent([]byte{1, 2, 3}, "image/png"), AudioContent(nil, "audio/wav"),
			ResourceLinkContent(&Resource{URI: "test://x", Name: "x"}), EmbeddedResource(&ResourceContents{URI: "test://y", Text: "<y>"}),
			{Type: "text", Text: "annotated", Annotations: &Annotations{Priority: &prio}}, {Type: "text", Text: "m", Meta: map[string]any{"k": "\u2028"}}},
			StructuredContent: json.RawMessage(`{"a":[1,"\u2028<b>"]}`)},
	)
	for _, w := range results {
		fast, err := protocol.AppendValue(nil, w)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := protocol.AppendValue(nil, reflective{w})
		if err != nil {
			t.Fatal(err)
		}
		if string(fast) != string(slow) {
			t.Errorf("fast path differs:\nfast %.300s\nslow %.300s", fast, slow)
		}
		// docs/transport.md §11.1 and case 51: <, > and & are written as they are.
		if strings.Contains(string(fast), `\u003c`) || strings.Contains(string(fast), `\u0026`) {
			t.Errorf("HTML escaped: %.300s", fast)
		}
	}
}

// Structured content is written as every frame is, with <, > and & as they
// are, in structuredContent and in the text block made from it.
func TestStructuredContentNotHTMLEscaped(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		H string `json:"h"`
	}
	AddTool(s, &Tool{Name: "html"}, func(context.Context, *CallToolRequest, struct{}) (*CallToolResult, out, error) {
		return nil, out{H: "<b>&"}, nil
	})
	params := `{"name":"html","arguments":{},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
	o := s.Dispatch(context.Background(), &Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(params)})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	frame, err := protocol.AppendValue(nil, o.Result)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"structuredContent":{"h":"<b>&"}`, `"text":"{\"h\":\"<b>&\"}"`} {
		if !strings.Contains(string(frame), want) {
			t.Errorf("result %s lacks %s", frame, want)
		}
	}
}

// TestToolResultSplicesLargeText: a tool's large text result, in either
// era, is spliced into its frame (protocol.Splices) instead of copied,
// and the spliced frame is the one AppendResult writes.
func TestToolResultSplicesLargeText(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	large := strings.Repeat("plain text, ", protocol.SpliceMin/12+1)
	AddTool(s, &Tool{Name: "large"}, func(_ context.Context, _ *CallToolRequest, _ struct{}) (*CallToolResult, any, error) {
		return &CallToolResult{Content: []Content{TextContent("small"), TextContent(large)}}, nil, nil
	})
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"large","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"large","arguments":{}}}`,
	} {
		msg := protocol.Decode([]byte(line))
		sess := NewSessionState(0)
		req := &Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess}
		if !msg.Modern {
			sess.SetNegotiated(protocol.Version20250618)
			req.Header = map[string][]string{HeaderProtocolVersion: {protocol.Version20250618}}
		}
		o := s.Dispatch(context.Background(), req)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		want, err := protocol.AppendResult(nil, msg.ID, o.Result)
		if err != nil {
			t.Fatal(err)
		}
		var sp protocol.Splices
		buf, err := protocol.AppendResultSpliced(nil, msg.ID, o.Result, &sp)
		if err != nil {
			t.Fatal(err)
		}
		if len(sp) != 1 || sp[0].Text != large {
			t.Fatalf("modern %v: %d splices, want the large text's", msg.Modern, len(sp))
		}
		if got := bytes.Join(sp.Parts(nil, buf), nil); !bytes.Equal(got, want) {
			t.Fatalf("modern %v: the spliced frame differs from AppendResult's", msg.Modern)
		}
	}
}
