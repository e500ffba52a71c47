package mcpclient

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/internal/syncbuf"
)

// This is the package's only TestMain: it builds internal/fakeupstream
// once into a temporary directory (fakePath), makes the test process a
// child subreaper so that a leaked grandchild shows up as its child
// (proctest), and checks for leaked goroutines at the end.

// fakePath is the built fake upstream.
var fakePath string

func TestMain(m *testing.M) {
	fakebuild.Main(m, &fakePath)
}

// fakeCommand runs the fake upstream with flags.
func fakeCommand(flags ...string) Command {
	return Command{Path: fakePath, Args: flags, Env: []string{"PATH=/usr/bin:/bin"}}
}

// logBuffer collects a Conn's log lines for assertions.
type logBuffer = syncbuf.Buffer

// startFake starts a Conn on the fake upstream, stopped (and checked for
// leaked processes) when the test ends.
func startFake(t testing.TB, o Options, flags ...string) *Conn {
	t.Helper()
	return startCommand(t, fakeCommand(flags...), o)
}

// startCommand is startFake with a Command of the test's.
func startCommand(t testing.TB, cmd Command, o Options) *Conn {
	t.Helper()
	proctest.Cleanup(t)
	if o.Name == "" {
		o.Name = "fake"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, cmd, o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { stop(c) })
	return c
}

// exitOf is how c's process ended (nil before Done).
func exitOf(c *Conn) *ExitError {
	e, _ := c.Err().(*ExitError)
	return e
}

// stop stops c, giving it 10 s before SIGKILL.
func stop(c *Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Stop(ctx)
}

// callTool calls a fake tool and returns its structuredContent.
func callTool(t testing.TB, c *Conn, name string, arguments any, o CallOptions) map[string]json.RawMessage {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/call", toolParams(t, name, arguments, nil), o)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return structuredContent(t, res)
}

func toolParams(t testing.TB, name string, arguments any, meta map[string]any) json.RawMessage {
	t.Helper()
	p := map[string]any{"name": name}
	if arguments != nil {
		p["arguments"] = arguments
	}
	if meta != nil {
		p["_meta"] = meta
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func structuredContent(t testing.TB, res json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var r struct {
		StructuredContent map[string]json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	return r.StructuredContent
}

// history is what the fake saw.
type history fakebuild.History

func fakeHistory(t testing.TB, c *Conn) history {
	t.Helper()
	sc := callTool(t, c, "history", nil, CallOptions{})
	b, _ := json.Marshal(sc)
	var h history
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// methods lists the methods the fake saw, in order.
func (h history) methods() []string {
	var out []string
	for _, r := range h.Requests {
		out = append(out, r.Method)
	}
	return out
}
