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
	"github.com/snodod/snodod/transport/internal/progress"
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

// TestStalledProgressDoesNotHoldSlots pins a bug (docs/transport.md
// §10.2): a handler's progress report to a client that does not read
// waited for its acknowledgement up to progress.AckTimeout (5 s) holding
// its executor slot, so a client pipelining MaxConcurrency calls that
// report progress, and reading nothing, held every slot of the daemon that
// long. A report now waits only while the device takes writes: once it
// would block, the report gets ErrProgressTimeout at once (it stays with
// the coordinator, written in its turn), and the handler goes on. Here the
// handlers report until a report fails, far more than a socket holds, so
// each must meet the stall before it returns; the healthy session's echo,
// queued behind them, is answered well within progress.AckTimeout.
func TestStalledProgressDoesNotHoldSlots(t *testing.T) {
	srv, err := server.New(server.Options{Logger: discardLog})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 4 // MaxConcurrency: every slot
	message := strings.Repeat("m", progress.MaxMessageBytes)
	started := make(chan struct{}, calls)
	refusals := make(chan error, calls)
	srv.AddTool(&server.Tool{Name: "ticks", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			started <- struct{}{}
			for i := 1; i <= 2000; i++ { // 8 MB of progress: no socket holds it
				if err := server.ReportProgress(ctx, server.Progress{Progress: float64(i), Message: message}); err != nil {
					refusals <- err
					break
				}
			}
			return textResult("done"), nil
		})
	srv.AddTool(&server.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return textResult("pong"), nil
		})
	exec, err := executor.New(executor.Limits{MaxConcurrency: calls})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(ep endpoints) chan error {
		tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: srv, Executor: exec,
			Limits: limits.Limits{WriteTimeout: 30 * time.Second}, Logger: discardLog}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(context.Background()) }()
		return done
	}
	const initialize = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

	stalled := socketPair(t)
	stalledDone := serve(stalled)
	if _, err := io.WriteString(stalled.w, initialize+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stalled.r).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for i := range calls {
		fmt.Fprintf(&lines, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ticks","arguments":{},"_meta":{"progressToken":%d}}}`+"\n", i, i)
	}
	if _, err := io.WriteString(stalled.w, lines.String()); err != nil {
		t.Fatal(err)
	}
	for range calls {
		<-started // every slot is the stalled session's
	}

	healthy := socketPair(t)
	healthyDone := serve(healthy)
	healthyOut := newLineSource(healthy.r)
	if _, err := io.WriteString(healthy.w, initialize+"\n"); err != nil {
		t.Fatal(err)
	}
	healthyOut.next(t)
	sent := time.Now()
	if _, err := io.WriteString(healthy.w, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if l := healthyOut.next(t); !strings.Contains(l, `"id":1,"result"`) || !strings.Contains(l, "pong") {
		t.Fatalf("the healthy session's echo: %s", l)
	}
	if took, within := time.Since(sent), progress.AckTimeout-time.Second; took > within {
		t.Errorf("the healthy session's echo took %v: the stalled session's reports held the slots (want within %v)", took, within)
	}
	for range calls {
		if err := <-refusals; !errors.Is(err, server.ErrProgressTimeout) {
			t.Errorf("a stalled report returned %v, want ErrProgressTimeout", err)
		}
	}
	select {
	case err := <-stalledDone:
		t.Fatalf("the stalled session ended (%v) before the healthy one was answered", err)
	default:
	}

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

// TestStalledProgressResumes: a report refused because the client stopped
// reading (ErrProgressTimeout) stays with the coordinator, and once the
// client reads again and it is written, the request's next report is
// written too (docs/transport.md §10.2). It used to stay outstanding for
// good: every later report of the request got ErrProgressBusy.
func TestStalledProgressResumes(t *testing.T) {
	srv, err := server.New(server.Options{Logger: discardLog})
	if err != nil {
		t.Fatal(err)
	}
	message := strings.Repeat("m", progress.MaxMessageBytes)
	stalledAt := make(chan error, 1)
	resume := make(chan struct{})
	srv.AddTool(&server.Tool{Name: "ticks", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			i := 1
			for ; i < progress.MaxNotifications/2; i++ { // 2 MB of progress: no socket holds it
				if err := server.ReportProgress(ctx, server.Progress{Progress: float64(i), Message: message}); err != nil {
					stalledAt <- err
					break
				}
			}
			<-resume
			// The refused report is written once the client reads; until
			// then the next is busy (or, while the device still would
			// block, refused in its turn).
			deadline := time.Now().Add(10 * time.Second)
			for {
				i++
				err := server.ReportProgress(ctx, server.Progress{Progress: float64(i), Message: "again"})
				retry := errors.Is(err, server.ErrProgressBusy) || errors.Is(err, server.ErrProgressTimeout)
				if !retry || time.Now().After(deadline) {
					return textResult(fmt.Sprintf("again: %v", err)), nil
				}
				time.Sleep(time.Millisecond)
			}
		})
	exec, err := executor.New(executor.Limits{MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	ep := socketPair(t)
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: srv, Executor: exec,
		Limits: limits.Limits{WriteTimeout: 30 * time.Second}, Logger: discardLog}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(context.Background()) }()
	const initialize = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if _, err := io.WriteString(ep.w, initialize+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(ep.r).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(ep.w, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ticks","arguments":{},"_meta":{"progressToken":"p"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := <-stalledAt; !errors.Is(err, server.ErrProgressTimeout) {
		t.Fatalf("a report to a client that does not read returned %v, want ErrProgressTimeout", err)
	}
	close(resume)
	out := newLineSource(ep.r) // the client reads again
	var again bool
	for {
		l := out.next(t)
		if strings.Contains(l, `"message":"again"`) {
			again = true
		}
		if strings.Contains(l, `"id":1,`) {
			if !strings.Contains(l, "again: <nil>") || !again {
				t.Errorf("after the client read again: %s (the report written: %v)", l, again)
			}
			break
		}
	}
	ep.closeInput()
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v", err)
	}
	ep.closeAll()
	exec.Close()
	goleak.VerifyNone(t)
}
