package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// A kept child handed over goes on serving through the Conn that adopts
// its pipes: the same process, its state kept (the requests it saw), no
// second initialize, ids that follow the old Conn's; the old Conn ends
// with ErrHandedOver without signalling it, and the adopter stops it.
func TestHandOverAdopt(t *testing.T) {
	cmd := fakeCommand()
	cmd.Kept = true
	c := startCommand(t, cmd, Options{})
	callTool(t, c, "echo", map[string]any{"before": 1}, CallOptions{})
	pid := c.PID()
	h, files, err := c.HandOver()
	if err != nil {
		t.Fatalf("HandOver: %v", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), ErrHandedOver) {
		t.Errorf("the old Conn ended with %v, want ErrHandedOver", c.Err())
	}
	if !proctest.Alive(pid) || h.PID != pid {
		t.Fatalf("the handed-over server %d (record %d) is not running", pid, h.PID)
	}
	a, err := Adopt(*h, files, cmd, Options{Name: "fake", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	t.Cleanup(func() { stop(a) })
	if a.PID() != pid || a.Era() != c.Era() || a.Version() != c.Version() {
		t.Errorf("adopted: pid %d era %s version %s; want %d %s %s", a.PID(), a.Era(), a.Version(), pid, c.Era(), c.Version())
	}
	sc := callTool(t, a, "history", map[string]any{}, CallOptions{})
	var hist struct {
		Requests []struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Tool   string          `json:"tool"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(mustJSON(t, sc), &hist); err != nil {
		t.Fatal(err)
	}
	inits, echoes, lastID := 0, 0, int64(0)
	for _, r := range hist.Requests {
		switch {
		case r.Method == "initialize":
			inits++
		case r.Tool == "echo":
			echoes++
		}
		var id int64
		if json.Unmarshal(r.ID, &id) == nil {
			if id <= lastID {
				t.Errorf("request id %d after %d: the adopter reused an id", id, lastID)
			}
			lastID = id
		}
	}
	if inits != 1 || echoes != 1 {
		t.Errorf("the server saw %d initialize and %d echo, want 1 and 1 (its state kept): %+v", inits, echoes, hist.Requests)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.Stop(ctx)
	var exit *ExitError
	if !errors.As(a.Err(), &exit) || !errors.Is(exit, proc.ErrNotChild) {
		t.Errorf("the adopted Conn ended with %v, want its status unknown (ErrNotChild)", a.Err())
	}
	eventually.True(t, "the adopted server to exit", func() bool { return !proctest.Alive(pid) })
}

// A Conn with a call in flight is not handed over, and goes on serving;
// nor is one whose child was not started kept (TestHandOverNotKept).
func TestHandOverBusy(t *testing.T) {
	cmd := fakeCommand()
	cmd.Kept = true
	c := startCommand(t, cmd, Options{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "tools/call", toolParams(t, "slow", map[string]any{"ms": 300}, nil), CallOptions{})
		done <- err
	}()
	eventually.True(t, "the call in flight", func() bool { return c.InFlight() == 1 })
	if _, _, err := c.HandOver(); !errors.Is(err, ErrBusy) {
		t.Errorf("HandOver with a call in flight = %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	callTool(t, c, "echo", map[string]any{}, CallOptions{})
}

func TestHandOverNotKept(t *testing.T) {
	plain := startFake(t, Options{})
	if _, _, err := plain.HandOver(); !errors.Is(err, ErrBusy) {
		t.Errorf("HandOver of a child not kept = %v, want ErrBusy", err)
	}
	callTool(t, plain, "echo", map[string]any{}, CallOptions{})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
