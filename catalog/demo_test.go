package catalog_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

func demoServer() *server.Server {
	s := server.New(server.Info{})
	catalog.Demo(s)
	return s
}

// call runs tools/call name with args on s as a 2025-11-25 request.
func call(ctx context.Context, s *server.Server, name, args string) server.Outcome {
	h := http.Header{}
	h.Set(server.HeaderProtocolVersion, "2025-11-25")
	params := `{"name":"` + name + `"`
	if args != "" {
		params += `,"arguments":` + args
	}
	params += "}"
	return s.Dispatch(ctx, &server.Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(params), Header: h})
}

// text returns the single text block of a successful tools/call outcome.
func text(t *testing.T, out server.Outcome) (string, bool) {
	t.Helper()
	if out.Err != nil {
		t.Fatalf("error %v", out.Err)
	}
	res, ok := out.Result.(*server.ToolResult)
	if !ok || len(res.Content) != 1 || res.Content[0].Type != "text" {
		t.Fatalf("result = %#v, want one text block", out.Result)
	}
	return res.Content[0].Text, res.IsError
}

func TestDemoTools(t *testing.T) {
	h := http.Header{}
	h.Set(server.HeaderProtocolVersion, "2025-06-18")
	out := demoServer().Dispatch(t.Context(), &server.Request{Method: "tools/list", Header: h})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	b, err := json.Marshal(out.Result)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct {
			Name        string
			Description string
			InputSchema struct {
				Type       string
				Properties map[string]struct{ Type string }
				Required   []string
			}
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	want := []string{"big bytes:integer", "echo text:string", "fail", "panic", "sleep ms:integer"}
	var got []string
	for _, tool := range list.Tools {
		if tool.Description == "" || tool.InputSchema.Type != "object" || tool.InputSchema.Properties == nil {
			t.Errorf("tool %s: description %q, schema %+v", tool.Name, tool.Description, tool.InputSchema)
		}
		sig := tool.Name
		for _, r := range tool.InputSchema.Required {
			sig += " " + r + ":" + tool.InputSchema.Properties[r].Type
		}
		got = append(got, sig)
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("tools = %q, want %q", got, want)
	}
}

func TestDemoCalls(t *testing.T) {
	s := demoServer()
	tests := []struct {
		name, tool, args string
		text             string
		isError          bool
	}{
		{"echo", "echo", `{"text":"hi"}`, "hi", false},
		{"echo empty", "echo", `{"text":""}`, "", false},
		{"echo unicode", "echo", `{"text":"héllo \u2028 <b>"}`, "héllo \u2028 <b>", false},
		{"echo not a string", "echo", `{"text":5}`, "echo: argument text must be a string", true},
		{"echo missing text", "echo", `{}`, "Missing required arguments: text", true},
		{"fail", "fail", ``, "fail: this demo tool always fails, on purpose", true},
		{"sleep zero", "sleep", `{"ms":0}`, "done", false},
		{"sleep short", "sleep", `{"ms":20}`, "done", false},
		{"sleep integral float", "sleep", `{"ms":1e1}`, "done", false},
		{"sleep fraction", "sleep", `{"ms":1.5}`, "sleep: argument ms must be an integer", true},
		{"sleep string", "sleep", `{"ms":"10"}`, "sleep: argument ms must be an integer", true},
		{"sleep negative", "sleep", `{"ms":-1}`, "sleep: argument ms must be at least 0", true},
		{"sleep too long", "sleep", `{"ms":3600001}`, "sleep: argument ms must be at most 3600000", true},
		{"sleep huge", "sleep", `{"ms":1e400}`, "sleep: argument ms must be at most 3600000", true},
		{"big zero", "big", `{"bytes":0}`, "", false},
		{"big over the cap", "big", `{"bytes":67108865}`, "big: argument bytes must be at most 67108864", true},
		{"big over int64", "big", `{"bytes":99999999999999999999}`, "big: argument bytes must be at most 67108864", true},
		{"big negative", "big", `{"bytes":-5}`, "big: argument bytes must be at least 0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, isError := text(t, call(t.Context(), s, tt.tool, tt.args))
			if got != tt.text || isError != tt.isError {
				t.Errorf("got %q (isError %v), want %q (isError %v)", got, isError, tt.text, tt.isError)
			}
		})
	}
}

func TestDemoBig(t *testing.T) {
	s := demoServer()
	for _, n := range []int{1, 1000, 1 << 20, catalog.MaxBigBytes} {
		got, isError := text(t, call(t.Context(), s, "big", `{"bytes":`+strconv.Itoa(n)+`}`))
		if isError || len(got) != n {
			t.Errorf("big %d: %d bytes, isError %v", n, len(got), isError)
		}
	}
}

func TestDemoPanic(t *testing.T) {
	if out := call(t.Context(), demoServer(), "panic", ""); out.Err != protocol.ErrToolPanicked {
		t.Fatalf("outcome = %+v, want ErrToolPanicked", out)
	}
}

// reporter records progress reports, as a transport's sink would.
type reporter struct {
	mu      sync.Mutex
	reports []server.Progress
	err     error // returned by every Report
}

func (r *reporter) Report(p server.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, p)
	return r.err
}

func TestDemoSleepProgress(t *testing.T) {
	for _, refuse := range []error{nil, server.ErrProgressBusy} {
		r := &reporter{err: refuse}
		ctx := server.WithProgress(t.Context(), r)
		start := time.Now()
		got, isError := text(t, call(ctx, demoServer(), "sleep", `{"ms":450}`))
		if got != "done" || isError {
			t.Fatalf("sleep = %q, isError %v", got, isError)
		}
		if took := time.Since(start); took < 450*time.Millisecond {
			t.Errorf("sleep 450 took %v", took)
		}
		r.mu.Lock()
		if len(r.reports) < 1 || len(r.reports) > 4 {
			t.Errorf("%d reports, want about one per 100 ms: %+v", len(r.reports), r.reports)
		}
		last := 0.0
		for _, p := range r.reports {
			if p.Progress <= last || p.Progress >= 450 || !p.HasTotal || p.Total != 450 || p.Message != "" {
				t.Errorf("report %+v after progress %v", p, last)
			}
			last = p.Progress
		}
		r.mu.Unlock()
	}
}

func TestDemoSleepCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan server.Outcome)
	start := time.Now()
	go func() { done <- call(ctx, demoServer(), "sleep", `{"ms":60000}`) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case out := <-done:
		got, isError := text(t, out)
		if !isError || got != context.Canceled.Error() {
			t.Errorf("cancelled sleep = %q, isError %v", got, isError)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("cancelled sleep returned after %v", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sleep did not return after cancellation")
	}
}

func TestStatus(t *testing.T) {
	s := server.New(server.Info{})
	catalog.Status(s, "1.2.3", time.Now().Add(-90*time.Second))
	got, isError := text(t, call(t.Context(), s, "status", `{}`))
	if got != "snodod 1.2.3, up 1m30s" || isError {
		t.Errorf("status = %q, isError %v", got, isError)
	}
}
