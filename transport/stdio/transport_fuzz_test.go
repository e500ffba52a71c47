package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// fuzzServer is the runtime FuzzTransport serves: real server.Server
// dispatch (every era's rules) with tools that finish on their own, so
// that a session always ends once its input has. Tools that ask the
// client something would wait for an answer the fuzzer never sends.
func fuzzServer(t testing.TB) *server.Server {
	srv, err := server.New(server.Options{SubscribableResources: true, Logger: discardLog})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddTool(&server.Tool{Name: "echo", InputSchema: json.RawMessage(echoInput)},
		func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(req.Arguments, &in); err != nil {
				return nil, err
			}
			return textResult(in.Text), nil
		})
	srv.AddTool(&server.Tool{Name: "progress"},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			_ = server.ReportProgress(ctx, server.Progress{Progress: 1, Total: 2, HasTotal: true})
			return textResult("finished"), nil
		})
	srv.AddTool(&server.Tool{Name: "raising"},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) { panic("raising") })
	srv.AddResource(&server.Resource{URI: "test://static-text", Name: "static-text", MIMEType: "text/plain"},
		func(_ context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: req.URI, Text: "text"}}}, nil
		})
	srv.AddPrompt(&server.Prompt{Name: "simple"},
		func(context.Context, *server.GetPromptRequest) (*server.GetPromptResult, error) {
			return &server.GetPromptResult{Messages: []server.PromptMessage{{Role: "user", Content: server.TextContent("hi")}}}, nil
		})
	return srv
}

// transcriptInputs returns the "-- in --" sections of the golden
// transcripts: every line the transport's contract cases send.
func transcriptInputs(t testing.TB) []string {
	files, err := filepath.Glob("testdata/transcripts/*/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var ins []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := readArchive(b)
		if err != nil {
			t.Fatal(err)
		}
		if in, ok := section(ar, "in"); ok {
			ins = append(ins, in)
		}
	}
	return ins
}

// FuzzTransport feeds arbitrary input to a whole session (bounded reader,
// decoder, classifier, dispatch of every era, the executor, the writer)
// and checks what comes out: Serve ends after end of input, every output
// line is one JSON-RPC 2.0 message, every response answers an id some
// input line carried (or is null), and no line is answered twice.
func FuzzTransport(f *testing.F) {
	for _, in := range transcriptInputs(f) {
		f.Add([]byte(in), uint16(0))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":1}}}`+"\n"), uint16(0))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"+`{"jsonrpc":"2.0","id":1,"method":"ping"}`), uint16(40))
	f.Add([]byte("\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\"}\r\n[]\n{"), uint16(12))
	srv := fuzzServer(f)
	exec, err := executor.New(executor.Limits{RequestTimeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(exec.Close)
	f.Fuzz(func(t *testing.T, input []byte, limit uint16) {
		var out bytes.Buffer
		tr := &stdio.Transport{In: bytes.NewReader(input), Out: &out, Dispatcher: srv, Executor: exec,
			Limits: limits.Limits{MaxLineBytes: int(limit)}, Logger: discardLog}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve returned %v after end of input", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return within 30 s of end of input")
		}
		checkOutput(t, input, int(limit), out.Bytes())
	})
}

// checkOutput checks a session's output against its input.
func checkOutput(t *testing.T, input []byte, limit int, output []byte) {
	if limit == 0 {
		limit = limits.DefaultMaxLineBytes
	}
	// The ids each input line carried, as the decoder reads them: a line
	// may be answered once, under its id or null.
	ids := map[protocol.ID]int{}
	for _, line := range bytes.SplitAfter(input, []byte("\n")) {
		if len(line) == 0 || len(line) > limit {
			continue
		}
		m := protocol.Decode(bytes.TrimSuffix(line, []byte("\n")))
		if m.Kind == protocol.KindRequest || m.Kind == protocol.KindInvalid {
			ids[m.ID]++
		}
	}
	if len(output) > 0 && output[len(output)-1] != '\n' {
		t.Fatalf("output ends in a partial line: %.200q", output)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(output), "\n"), "\n") {
		if line == "" {
			if len(output) > 0 {
				t.Fatalf("an empty output line in %.300q", output)
			}
			continue
		}
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  *string         `json:"method"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Fatalf("output line is not a JSON-RPC 2.0 message (%v): %.300s", err, line)
		}
		if msg.Method != nil {
			if msg.ID != nil {
				t.Fatalf("the server sent a request to a client that asked for none: %.300s", line)
			}
			continue
		}
		if (msg.Result == nil) == (msg.Error == nil) {
			t.Fatalf("a response needs exactly one of result and error: %.300s", line)
		}
		if string(msg.ID) == "null" {
			continue
		}
		id, ok := protocol.ParseID(msg.ID)
		if !ok {
			t.Fatalf("a response with an id no request can carry: %.300s", line)
		}
		if ids[id] == 0 {
			t.Fatalf("a response to id %s, which no input line left unanswered: %.300s\ninput %.500q", id, line, input)
		}
		ids[id]--
	}
}
