package daemon

import (
	"testing"

	"github.com/snodod/snodod/server"
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
	want := server.ExecutorLimits{MaxConcurrency: cfg.Limits.MaxConcurrency, MaxQueue: 7, ConnQueue: 4, RequestTimeout: cfg.Limits.RequestTimeout}
	if got != want {
		t.Fatalf("executor limits %+v, want %+v", got, want)
	}
}
