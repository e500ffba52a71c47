package stdio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

// echoDispatcher answers every request with a fixed small result, so the
// benchmarks measure the transport, decoder, encoder and executor.
type echoDispatcher struct{}

var echoResult = map[string]any{"content": []any{map[string]any{"type": "text", "text": "hello"}}, "isError": false}

func (echoDispatcher) Notify(*server.SessionState, string, json.RawMessage) {}

func (echoDispatcher) Initialize(*server.SessionState, json.RawMessage) (any, string, *protocol.Error) {
	return map[string]any{}, "2025-06-18", nil
}

func (echoDispatcher) Dispatch(context.Context, *server.Request) server.Outcome {
	return server.Outcome{Result: echoResult}
}

func (echoDispatcher) DispatchInline(context.Context, *server.Request) (server.Outcome, bool) {
	return server.Outcome{}, false
}

func benchConn(b *testing.B) (w io.Writer, r *bufio.Reader, stop func()) {
	return serveOnPipes(b, echoDispatcher{})
}

// serveOnPipes serves d on a pair of pipes for a benchmark; stop ends the
// input and waits for Serve.
func serveOnPipes(b *testing.B, d server.Dispatcher) (w io.Writer, r *bufio.Reader, stop func()) {
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	tr := &stdio.Transport{In: inR, Out: outW, Dispatcher: d}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(context.Background()) }()
	return inW, bufio.NewReaderSize(outR, 1<<16), func() {
		inW.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		for _, f := range []*os.File{inR, outR, outW} {
			f.Close()
		}
	}
}

func benchLine(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":` + meta + `}}` + "\n")
}

// BenchmarkRoundTrip is one request at a time over a pipe pair.
func BenchmarkRoundTrip(b *testing.B) {
	w, r, stop := benchConn(b)
	defer stop()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := w.Write(benchLine(i)); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipelined keeps 64 requests in flight over a pipe pair.
func BenchmarkPipelined(b *testing.B) {
	const window = 64
	w, r, stop := benchConn(b)
	defer stop()
	b.ReportAllocs()
	sent, received := 0, 0
	b.ResetTimer()
	for received < b.N {
		for sent < b.N && sent-received < window {
			if _, err := w.Write(benchLine(sent)); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		if _, err := r.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
		received++
	}
}

// runtimeConn serves the real MCP runtime with one typed echo tool, so the
// benchmark covers dispatch, schema validation and result shaping too.
func runtimeConn(b *testing.B) (io.Writer, *bufio.Reader, func()) {
	s, err := server.New(server.Options{})
	if err != nil {
		b.Fatal(err)
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	server.AddTool(s, &server.Tool{Name: "echo"}, func(_ context.Context, _ *server.CallToolRequest, in echoIn) (*server.CallToolResult, any, error) {
		return &server.CallToolResult{Content: []server.Content{server.TextContent(in.Text)}}, nil, nil
	})
	return serveOnPipes(b, s)
}

// BenchmarkRuntimePipelined keeps 64 2026-07-28 tools/call requests in
// flight through the transport and the real runtime.
func BenchmarkRuntimePipelined(b *testing.B) {
	const window = 64
	w, r, stop := runtimeConn(b)
	defer stop()
	b.ReportAllocs()
	sent, received := 0, 0
	for received < b.N {
		for sent < b.N && sent-received < window {
			if _, err := w.Write(benchLine(sent)); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if received == 0 && !bytes.Contains(line, []byte(`"hello"`)) {
			b.Fatalf("unexpected answer %s", line)
		}
		received++
	}
}
