package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/server/executor"
)

// The daemon's executor gives each session queue places of its own
// besides executor.max_queue (docs/transport.md §13.2): server's
// TestExecutorEverySessionHasRoom shows what that buys at the default
// limits.
func TestExecutorSessionQueue(t *testing.T) {
	cfg := testConfig(t, shortDir(t), map[string]any{"executor.max_queue": 7})
	d, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := d.gen.Load().exec.Limits()
	want := executor.Limits{MaxConcurrency: cfg.Limits.MaxConcurrency, MaxQueue: 7, ConnQueue: 4, RequestTimeout: cfg.Limits.RequestTimeout}
	if got != want {
		t.Fatalf("executor limits %+v, want %+v", got, want)
	}
}

// A daemon session's dispatcher keeps the runtime's inline shortcut
// (docs/architecture.md §4.1): with every executor slot busy and every
// queue place taken, ping and the lists are still answered, on the
// session's coordinator, while a call beyond the queue is refused.
func TestSessionInlineWithExecutorFull(t *testing.T) {
	cfg := testConfig(t, shortDir(t), map[string]any{"executor.max_concurrency": 1, "executor.max_queue": 1})
	r := startDaemon(t, cfg, Options{})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	// One running, the session's 4 own places, the one shared place.
	const admitted = 1 + 4 + 1
	for id := 2; id < 2+admitted; id++ {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`, id))
	}
	exec := r.d.gen.Load().exec
	eventually.True(t, "the executor to be full", func() bool {
		st := exec.Stats()
		return st.Running == 1 && st.Queued == admitted-1
	})
	c.send(`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	if got := c.answer(20); !strings.Contains(got, `"error"`) {
		t.Fatalf("a call beyond the queue: %s, want a refusal", got)
	}
	c.send(`{"jsonrpc":"2.0","id":21,"method":"ping"}`)
	if got, want := c.answer(21), `{"jsonrpc":"2.0","id":21,"result":{}}`; got != want {
		t.Fatalf("ping with the executor full: %s, want %s", got, want)
	}
	c.send(`{"jsonrpc":"2.0","id":22,"method":"tools/list"}`)
	if got := c.answer(22); !strings.Contains(got, `"result":{"tools":[`) {
		t.Fatalf("tools/list with the executor full: %s", got)
	}
	if st := exec.Stats(); st.Running != 1 || st.Queued != admitted-1 {
		t.Fatalf("executor %+v after the inline answers, want the sleeps only", st)
	}
}
