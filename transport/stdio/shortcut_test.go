package stdio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// The two shortcuts of docs/architecture.md §4.1 and §4.2: the runtime's own
// non-blocking methods are answered on the coordinator, and the worker that
// finished a request commits its final frame itself. These pin what they
// must keep.

// The runtime's ping, list methods and server/discover never enter the
// executor: with every slot and queue place taken they are still
// answered, while a tools/call is refused for capacity.
func TestInlineMethodsSkipTheExecutor(t *testing.T) {
	ep := pipes(t)
	srv, err := server.New(server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv.AddTool(&server.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &server.CallToolResult{Content: []server.Content{server.TextContent("released")}}, nil
		})
	exec, err := executor.New(executor.Limits{MaxConcurrency: 1, MaxQueue: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: srv, Executor: exec}
	served := make(chan error, 1)
	go func() { served <- tr.Serve(context.Background()) }()
	r := newLineSource(ep.r)
	modern := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for i := 1; i <= 2; i++ { // one runs, one waits
		ep.w.Write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block",%s}}`+"\n", i, modern)))
	}
	eventually.True(t, "one queued call", func() bool { return exec.Stats().Queued == 1 })
	ep.w.Write([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"block",` + modern + `}}` + "\n"))
	if l := r.next(t); l != errLine("3", -32603, "Server execution capacity exhausted") {
		t.Fatalf("got %s", l)
	}
	for i, method := range []string{"ping", "tools/list", "server/discover", "resources/list", "prompts/list", "resources/templates/list"} {
		id := 10 + i
		ep.w.Write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`+"\n", id, method, modern)))
		l := r.next(t)
		var f struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *protocol.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &f); err != nil || f.ID != id {
			t.Fatalf("%s: got %s", method, l)
		}
		// An empty catalog gates resources and prompts (-32601); either
		// way the answer came at once, past a full executor.
		if f.Error != nil && f.Error.Code != protocol.CodeMethodNotFound {
			t.Fatalf("%s: got %s", method, l)
		}
	}
	close(release)
	for range 2 {
		if l := r.next(t); !strings.Contains(l, `"released"`) {
			t.Fatalf("got %s", l)
		}
	}
	ep.closeInput()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	ep.closeAll()
	exec.Close()
	goleakCheck(t)
}

// The Counters follow a request that a worker finished, with the
// coordinator waiting for input: nothing else has to happen for InFlight
// to come back to zero.
func TestCountersFollowWorkers(t *testing.T) {
	var counters stdio.Counters
	h := start(t, pipes, with(func(tr *stdio.Transport) { tr.Counters = &counters }))
	h.send(call(1, "block", `{}`))
	<-h.cat.started
	if n := counters.InFlight(); n != 1 {
		t.Fatalf("InFlight = %d with a request running, want 1", n)
	}
	h.cat.Release()
	h.line()
	eventually.True(t, "nothing in flight", func() bool { return counters.InFlight() == 0 })
	h.send(call(2, "echo", `{"text":"x"}`))
	if got := resultText(t, h.line()); got != "x" {
		t.Fatalf("got %q", got)
	}
	eventually.True(t, "nothing in flight", func() bool { return counters.InFlight() == 0 })
	h.finish()
}

// A cancellation racing a worker's final frame: for each request, either
// its result (committed before the cancellation was processed) or nothing
// at all, never a frame after it, never two. The id is free again at once
// either way.
func TestCancelRacesTheWorker(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		h := start(t, open)
		const n = 100 // with the ids reused, 200 at most are admitted: within the default capacity
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s\n%s\n", call(i, "echo", fmt.Sprintf(`{"text":"%d"}`, i)), cancelLine(i))
		}
		h.write(b.String())
		// The ids are reused at once; the answers to these come last.
		for i := range n {
			h.send(call(i, "echo", fmt.Sprintf(`{"text":"again %d"}`, i)))
		}
		seen := map[string]int{}
		again := 0
		for again < n {
			l := h.line()
			f := parse(t, l)
			text := resultText(t, l)
			switch {
			case strings.HasPrefix(text, "again "):
				again++
			case text != string(f.ID):
				t.Fatalf("wrong answer %s", l)
			default:
				if seen[text]++; seen[text] > 1 {
					t.Fatalf("two answers for %s", f.ID)
				}
			}
		}
		h.noOutput(50 * time.Millisecond)
		h.finish()
	})
}

func cancelLine(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id)
}
