package stdio_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// TestStalledSessionDoesNotStallOthers pins a bug (docs/architecture.md
// §3.4, docs/transport.md §11.5): a client that pipelines 200 calls with
// large results and stops reading must not delay an unrelated session
// sharing the executor. Its coordinator is stuck in a write; the workers
// finishing its calls must hand their outcomes over without waiting on it,
// and take the next job, which may be the other session's. With the
// default limits its answers (200 × 64 KiB) pass its pending output limit
// (8,000,000 bytes), so its last workers wait for room: they must give
// their executor slots back to wait, rather than hold every slot until the
// write timeout. The healthy session's echo is answered while the stalled
// session's write timeout has not fired yet (its Serve has not returned).
func TestStalledSessionDoesNotStallOthers(t *testing.T) {
	srv, err := server.New(server.Options{Logger: discardLog})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10) // a few fill a socket's buffer
	srv.AddTool(&server.Tool{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return textResult(big), nil
		})
	srv.AddTool(&server.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return textResult("pong"), nil
		})
	exec, err := executor.New(executor.Limits{MaxConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(ep endpoints, counters *stdio.Counters, writeTimeout time.Duration) chan error {
		tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: srv, Executor: exec,
			Counters: counters, Limits: limits.Limits{WriteTimeout: writeTimeout}, Logger: discardLog}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(context.Background()) }()
		return done
	}
	const initialize = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

	// The stalled session: initialized, then 200 pipelined calls it never
	// reads the answers of.
	stalled := socketPair(t)
	stalledCounters := &stdio.Counters{}
	stalledDone := serve(stalled, stalledCounters, 30*time.Second)
	if _, err := io.WriteString(stalled.w, initialize+"\n"); err != nil {
		t.Fatal(err)
	}
	// The initialize result is read; nothing more ever is.
	if _, err := bufio.NewReader(stalled.r).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	var calls strings.Builder
	for i := range 200 {
		fmt.Fprintf(&calls, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`+"\n", i)
	}
	if _, err := io.WriteString(stalled.w, calls.String()); err != nil {
		t.Fatal(err)
	}
	// Wait until the stalled session's output is full and its calls have
	// stopped: their workers wait for room, holding every slot (the bug)
	// or none.
	full := int64(limits.DefaultMaxPendingOutputBytes - 2*len(big))
	eventually.True(t, "the stalled session's workers waiting for room", func() bool {
		st := exec.Stats()
		return stalledCounters.PendingOutput() > full && (st.Running == 4 || st.Running == 0 && st.Detached > 0)
	})

	healthy := socketPair(t)
	healthyDone := serve(healthy, nil, 0)
	healthyOut := newLineSource(healthy.r)
	if _, err := io.WriteString(healthy.w, initialize+"\n"+`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	healthyOut.next(t)
	if l := healthyOut.next(t); !strings.Contains(l, `"id":1,"result"`) || !strings.Contains(l, "pong") {
		t.Fatalf("the healthy session's echo: %s", l)
	}
	select {
	case err := <-stalledDone:
		t.Fatalf("the stalled session ended (%v) before the healthy one was answered", err)
	default: // its write timeout has not fired: the echo did not wait for it
	}

	// End both: the stalled client goes away, the healthy one closes.
	stalled.closeAll()
	if err := <-stalledDone; !errors.As(err, new(*stdio.OutputError)) {
		t.Errorf("the stalled session returned %v, want an output failure", err)
	}
	healthy.closeInput()
	if err := <-healthyDone; err != nil {
		t.Errorf("the healthy session returned %v", err)
	}
	healthy.closeAll()
	exec.Close()
	goleak.VerifyNone(t)
}
