package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// newKeyed returns a server signing with key, serving one tool that
// elicits "choice".
func newKeyed(t *testing.T, key []byte) *server.Server {
	t.Helper()
	s, err := server.New(server.Options{StateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	s.AddTool(&server.Tool{Name: "ask"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		res, err := server.Elicit(ctx, "choice", server.ElicitParams{Message: "Pick"})
		if err != nil {
			return nil, err
		}
		return &server.CallToolResult{Content: []server.Content{server.TextContent(res.Action)}}, nil
	})
	return s
}

const askMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

func askRound(t *testing.T, s *server.Server, extra string) string {
	t.Helper()
	o := s.Dispatch(context.Background(), &server.Request{ID: protocol.IntID(1), Method: "tools/call",
		Params: json.RawMessage(`{"name":"ask",` + extra + askMeta + `}`)})
	if o.Err != nil {
		return "error: " + o.Err.Message
	}
	b, err := json.Marshal(o.Result)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSharedStateKey: a requestState signed by one server is accepted by
// another with the same key, as by a node behind the same load balancer,
// and refused by one with another key.
func TestSharedStateKey(t *testing.T) {
	key := []byte(strings.Repeat("k", server.MinStateKeyBytes))
	a, b := newKeyed(t, key), newKeyed(t, key)
	other := newKeyed(t, []byte(strings.Repeat("o", 40)))
	first := askRound(t, a, "")
	var round struct {
		RequestState string `json:"requestState"`
	}
	if err := json.Unmarshal([]byte(first), &round); err != nil || round.RequestState == "" {
		t.Fatalf("round 1: %s", first)
	}
	retry := `"inputResponses":{"choice":{"action":"decline"}},"requestState":"` + round.RequestState + `",`
	if got := askRound(t, b, retry); !strings.Contains(got, `"text":"decline"`) {
		t.Fatalf("retry on a server with the same key: %s", got)
	}
	if got := askRound(t, other, retry); got != "error: Invalid requestState" {
		t.Fatalf("retry on a server with another key: %s", got)
	}
}

func TestStateKeyLimits(t *testing.T) {
	if _, err := server.New(server.Options{StateKey: []byte(strings.Repeat("k", server.MinStateKeyBytes-1))}); err == nil ||
		err.Error() != "state key must be at least 32 bytes" {
		t.Fatalf("a 31-byte key: %v", err)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte(strings.Repeat("k", 31)+"\n"), 0o600)
	if _, err := server.LoadStateKey(short); err == nil || !strings.Contains(err.Error(), "at least 32 bytes, got 31") {
		t.Fatalf("short file: %v", err)
	}
	exact := filepath.Join(dir, "exact")
	os.WriteFile(exact, []byte(" "+strings.Repeat("k", 32)+"\n"), 0o600)
	if key, err := server.LoadStateKey(exact); err != nil || len(key) != 32 {
		t.Fatalf("32 bytes and whitespace: %q %v", key, err)
	}
	if _, err := server.LoadStateKey(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "server.state_key_file") {
		t.Fatalf("absent file: %v", err)
	}
}

func TestToolParamHeaders(t *testing.T) {
	s, _ := server.New(server.Options{})
	h := func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
		return &server.CallToolResult{}, nil
	}
	s.AddTool(&server.Tool{Name: "plain"}, h)
	s.AddTool(&server.Tool{Name: "mirrored", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer"}}}`)}, h)
	if m, ok := s.ToolParamHeaders("plain"); !ok || m != nil {
		t.Fatalf("plain: %v %v", m, ok)
	}
	if m, ok := s.ToolParamHeaders("mirrored"); !ok || len(m) != 1 || m["Region"] != "region" {
		t.Fatalf("mirrored: %v %v", m, ok)
	}
	if _, ok := s.ToolParamHeaders("absent"); ok {
		t.Fatal("an unknown tool was found")
	}
}
