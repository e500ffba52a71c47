package stdio_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// Case 41: progress lines in order, then the final line, for every way the
// handler can finish and both token types.
func TestProgressBeforeFinal(t *testing.T) {
	for _, finish := range []string{"complete", "error", "input_required"} {
		for _, token := range []string{`"token"`, `0`} {
			t.Run(finish+"/"+token, func(t *testing.T) {
				h := start(t, pipes)
				h.send(callWithToken(1, "progress", fmt.Sprintf(`{"finish":%q}`, finish), token))
				h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + token + `,"progress":0,"total":1,"message":"starting"}}`)
				h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + token + `,"progress":0.5,"total":1}}`)
				if f := parse(t, h.line()); string(f.ID) != "1" {
					t.Fatalf("final line for %s", f.ID)
				}
				h.finish()
			})
		}
	}
}

// Case 42: without a token, reports are accepted and discarded.
func TestProgressWithoutToken(t *testing.T) {
	h := start(t, pipes)
	h.send(call(1, "progress", `{"finish":"complete"}`))
	if f := parse(t, h.line()); string(f.ID) != "1" {
		t.Fatal("want the result only")
	}
	for range 2 {
		if err := <-h.cat.seen; err != nil {
			t.Fatalf("report without a sink: %v", err)
		}
	}
	h.finish()
}

// Case 43: concurrent requests interleave, each in its own order.
func TestProgressInterleaves(t *testing.T) {
	h := start(t, pipes)
	for i := 1; i <= 12; i++ {
		h.send(callWithToken(i, "progress", `{"finish":"complete"}`, fmt.Sprint(i)))
	}
	stage := map[string]int{}
	for range 36 {
		l := h.line()
		f := parse(t, l)
		key := string(f.ID)
		if f.Method == "notifications/progress" {
			var p struct {
				Token    any     `json:"progressToken"`
				Progress float64 `json:"progress"`
			}
			mustUnmarshal(t, f.Params, &p)
			key = fmt.Sprint(p.Token)
			if want := []float64{0, 0.5}[min(stage[key], 1)]; stage[key] > 1 || p.Progress != want {
				t.Fatalf("out of order: %s", l)
			}
		} else if stage[key] != 2 {
			t.Fatalf("final before its progress: %s", l)
		}
		stage[key]++
	}
	h.finish()
}

// Case 45: a token that is not a bounded id gets no sink (the dispatcher
// answers it; here the request runs without progress lines).
func TestProgressTokenNotBounded(t *testing.T) {
	for _, token := range []string{`1.5`, `{}`, `true`, `"` + strings.Repeat("t", 257) + `"`} {
		h := start(t, pipes)
		h.send(callWithToken(1, "progress", `{"finish":"complete"}`, token))
		if f := parse(t, h.line()); string(f.ID) != "1" {
			t.Fatalf("token %s: got a progress line", token)
		}
		h.finish()
	}
}

// Case 46: only strictly increasing reports are written.
func TestProgressNotIncreasing(t *testing.T) {
	h := start(t, pipes)
	h.send(callWithToken(1, "sequence", `{"values":[1,1,2]}`, `"p"`))
	h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
	h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":2}}`)
	h.line()
	want := []error{nil, server.ErrProgressNotIncreasing, nil}
	for i, w := range want {
		if got := <-h.cat.seen; !errors.Is(got, w) && got != w {
			t.Fatalf("report %d: %v, want %v", i, got, w)
		}
	}
	h.finish()
}

// Case 47: at most 1,000 notifications per request.
func TestProgressLimit(t *testing.T) {
	h := start(t, pipes)
	h.send(callWithToken(1, "counter", `{"n":1001}`, `"c"`))
	for i := 1; i <= 1000; i++ {
		if l := h.line(); !strings.Contains(l, fmt.Sprintf(`"progress":%d}`, i)) {
			t.Fatalf("progress %d: %s", i, l)
		}
	}
	if l := h.line(); resultText(t, l) != "1001" {
		t.Fatalf("got %s", l)
	}
	if err := <-h.cat.seen; !errors.Is(err, server.ErrProgressLimit) {
		t.Fatalf("handler saw %v", err)
	}
	select {
	case err := <-h.cat.seen:
		t.Fatalf("second rejection: %v", err)
	default:
	}
	h.finish()
}

// Case 48: a listen never gets progress.
func TestListenNoProgress(t *testing.T) {
	h := start(t, pipes)
	h.send(req("s", "subscriptions/listen", `{"notifications":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}}`))
	if f := parse(t, h.line()); f.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("got %+v", f)
	}
	h.finish()
}

// Invalid reports are refused before reaching the device, and the handler
// may go on reporting.
func TestProgressInvalidReport(t *testing.T) {
	h := start(t, pipes)
	h.send(callWithToken(1, "invalid_reports", `{}`, `"p"`))
	h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"` + strings.Repeat("m", 4096) + `"}}`)
	h.line()
	for i := range 4 {
		if err := <-h.cat.seen; !errors.Is(err, server.ErrProgressInvalid) {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	if err := <-h.cat.seen; err != nil {
		t.Fatal(err)
	}
	h.finish()
}

// Case 44: progress works the same under a negotiated legacy version.
func TestProgressLegacy(t *testing.T) {
	h := start(t, pipes)
	h.send(initReq("2025-06-18"))
	h.line()
	h.send(lreq(1, "tools/call", map[string]any{"name": "legacy_progress", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "p1"}}))
	h.expect(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":1,"total":2,"message":"halfway"}}`)
	if got := resultText(t, h.line()); got != "legacy" {
		t.Fatalf("got %s", got)
	}
	h.finish()
}

// One report outstanding at a time: a second report while the first waits
// for the device is refused as busy and writes nothing.
func TestProgressBusy(t *testing.T) {
	s := startStalled(t, pipes, stdio.Transport{}, executor.Limits{})
	io.WriteString(s.ep.w, callWithToken(1, "concurrent_reports", `{}`, `"b"`)+"\n")
	if err := <-s.cat.seen; !errors.Is(err, server.ErrProgressBusy) {
		t.Fatalf("second report: %v", err)
	}
	br := skipFiller(t, s.ep.r, s.filler)
	if err := <-s.cat.seen; err != nil {
		t.Fatalf("first report: %v", err)
	}
	for _, want := range []string{`"progress":1}`, `"result"`} {
		if l, _ := br.ReadString('\n'); !strings.Contains(l, want) {
			t.Fatalf("got %q, want %s", l, want)
		}
	}
	s.ep.closeInput()
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
}
