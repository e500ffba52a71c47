package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// legacySession is a 2025-11-25 session of s past notifications/initialized.
func legacySession(t *testing.T, s *Server) *SessionState {
	t.Helper()
	sess := NewSessionState(0)
	t.Cleanup(sess.Close)
	if _, _, perr := s.Initialize(sess, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)); perr != nil {
		t.Fatal(perr)
	}
	s.Notify(sess, "notifications/initialized", nil)
	return sess
}

// pending returns the methods of the notifications waiting for sess.
func pending(sess *SessionState) []string {
	var got []string
	for {
		ev, ok, _ := sess.Poll()
		if !ok {
			return got
		}
		got = append(got, ev.Method)
	}
}

func read(t *testing.T, s *Server, sess *SessionState, uri string) Outcome {
	t.Helper()
	req := &Request{Method: "resources/read", ID: protocol.IntID(1), State: sess, Header: http.Header{}}
	req.Header.Set(HeaderProtocolVersion, "2025-11-25")
	req.Params = json.RawMessage(fmt.Sprintf(`{"uri":%q}`, uri))
	return s.Dispatch(context.Background(), req)
}

func TestAddResourcesIsOneChange(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess := legacySession(t, s)
	h := func(_ context.Context, r *ReadResourceRequest) (*ReadResourceResult, error) {
		return &ReadResourceResult{Contents: []ResourceContents{{URI: r.URI, Text: "x"}}}, nil
	}
	var items []ResourceItem
	for i := range 250 {
		items = append(items, ResourceItem{Resource: &Resource{URI: fmt.Sprintf("test://%d", i), Name: "r"}, Handler: h})
	}
	s.AddResources(items...)
	if got := pending(sess); !slices.Equal(got, []string{"notifications/resources/list_changed"}) {
		t.Errorf("notifications = %q, want one list change", got)
	}
	if o := read(t, s, sess, "test://249"); o.Err != nil {
		t.Errorf("read: %v", o.Err)
	}
	s.AddResourceTemplate(&ResourceTemplate{URITemplate: "file:///a/{+path}", Name: "a"}, h)
	s.RemoveResourceTemplates("file:///a/{+path}")
	if o := read(t, s, sess, "file:///a/b/c"); o.Err == nil || o.Err.Code != protocol.CodeResourceNotFound {
		t.Errorf("read after the template was removed: %+v", o)
	}
}

func TestReservedTemplate(t *testing.T) {
	for _, tc := range []struct {
		template, uri string
		want          map[string]string
	}{
		{"file:///a/{+path}", "file:///a/b/c%20d.md", map[string]string{"path": "b/c%20d.md"}},
		{"file:///a/{+path}", "file:///a/", nil},
		{"file:///a/{+path}", "file:///b/c", nil},
		{"x://{id}/{+rest}", "x://7/a/b", map[string]string{"id": "7", "rest": "a/b"}},
		{"x://{id}", "x://7/a", nil},
	} {
		m, err := compileTemplate(tc.template)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := m.match(tc.uri)
		if ok != (tc.want != nil) || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s on %s = %v %v, want %v", tc.template, tc.uri, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"x://{#a}", "x://{+}", "x://{++a}"} {
		if _, err := compileTemplate(bad); err == nil {
			t.Errorf("%s compiled", bad)
		}
	}
}

func TestInvalidParamsErrorReachesTheClient(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.AddResource(&Resource{URI: "test://r", Name: "r"}, func(context.Context, *ReadResourceRequest) (*ReadResourceResult, error) {
		return nil, fmt.Errorf("read: %w", &InvalidParamsError{Message: "Refused: outside the root", Data: map[string]string{"rule": "root"}})
	})
	s.AddResource(&Resource{URI: "test://other", Name: "o"}, func(context.Context, *ReadResourceRequest) (*ReadResourceResult, error) {
		return nil, errors.New("disk on fire")
	})
	sess := legacySession(t, s)
	o := read(t, s, sess, "test://r")
	if o.Err == nil || o.Err.Code != protocol.CodeInvalidParams || o.Err.Message != "Refused: outside the root" || fmt.Sprint(o.Err.Data) != "map[rule:root]" {
		t.Errorf("refusal = %+v", o.Err)
	}
	if o := read(t, s, sess, "test://other"); o.Err == nil || o.Err.Code != protocol.CodeInternalError {
		t.Errorf("another error = %+v, want a bare -32603", o.Err)
	}
}

func TestNamesAndCheckSchema(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *CallToolRequest) (*CallToolResult, error) { return &CallToolResult{}, nil }
	s.AddTool(&Tool{Name: "b"}, noop)
	s.AddTool(&Tool{Name: "a"}, noop)
	s.AddPrompt(&Prompt{Name: "p"}, func(context.Context, *GetPromptRequest) (*GetPromptResult, error) { return nil, nil })
	if got := s.ToolNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("tools = %q", got)
	}
	if got := s.PromptNames(); !slices.Equal(got, []string{"p"}) {
		t.Errorf("prompts = %q", got)
	}
	if err := CheckSchema(json.RawMessage(`{"type":"object"}`)); err != nil {
		t.Errorf("a valid schema: %v", err)
	}
	if err := CheckSchema(json.RawMessage(`{"type":"objet"}`)); err == nil {
		t.Error("an invalid schema passed")
	}
}
