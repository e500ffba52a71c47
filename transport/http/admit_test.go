package http_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// admissions is the test catalog's server as a Dispatcher that counts
// the 2026 requests reaching the runtime with the admission the handler
// made before the executor, and those without.
type admissions struct {
	*server.Server
	with, without atomic.Int32
}

func (a *admissions) Dispatch(ctx context.Context, req *server.Request) server.Outcome {
	if req.Admission != nil {
		a.with.Add(1)
	} else {
		a.without.Add(1)
	}
	return a.Server.Dispatch(ctx, req)
}

// A 2026 POST's _meta is checked once (docs/protocol.md §5.2 steps 2 to
// 8), before the executor: the request reaches the runtime carrying the
// admission, which the runtime then uses instead of checking again.
func TestModernRequestsCarryTheirAdmission(t *testing.T) {
	var disp *admissions
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) {
		disp = &admissions{Server: o.Dispatcher.(*server.Server)}
		o.Dispatcher = disp
	})
	if r := e.call(t, "1", "tools/call", "echo", `"name":"echo","arguments":{"text":"hi"}`); r.status != 200 || !strings.Contains(r.body, `"text":"hi"`) {
		t.Fatalf("call: %d %s", r.status, r.body)
	}
	if with, without := disp.with.Load(), disp.without.Load(); with != 1 || without != 0 {
		t.Errorf("%d requests reached the runtime admitted and %d without, want 1 and 0", with, without)
	}
	// Refused at admission: the runtime never sees it.
	bad := strings.Replace(modernBody("2", "tools/call", `"name":"echo","arguments":{"text":"hi"}`), `"_meta":{`, `"_meta":{"bad key":1,`, 1)
	if r := post(t, e.url, modernHeaders("tools/call", "echo"), bad); r.status != 400 || !strings.Contains(r.body, "_meta contains an invalid key") {
		t.Errorf("bad _meta: %d %s", r.status, r.body)
	}
	if n := disp.with.Load() + disp.without.Load(); n != 1 {
		t.Errorf("%d requests reached the runtime, want the refused one not to", n)
	}
}
