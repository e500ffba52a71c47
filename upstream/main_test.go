package upstream

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/internal/syncbuf"
	"github.com/snodod/snodod/mcpclient"
)

// This is the package's only TestMain (the other upstream tests share it):
// it builds internal/fakeupstream once into a temporary directory
// (fakePath), makes the test process a child subreaper so that a leaked
// grandchild shows up as its child (proctest), and checks for leaked
// goroutines at the end. A test binary started with roleEnv set plays a
// helper process instead (see helperMain in orphans_test.go).

// fakePath is the built fake upstream.
var fakePath string

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(helperMain(role))
	}
	fakebuild.Main(m, &fakePath)
}

// logBuffer collects log lines for assertions.
type logBuffer = syncbuf.Buffer

// startFake starts a Conn on the fake upstream with cmd's record, stopped
// (and checked for leaked processes) when the test ends.
func startFake(t testing.TB, cmd mcpclient.Command, flags ...string) *mcpclient.Conn {
	t.Helper()
	proctest.Cleanup(t)
	cmd.Path, cmd.Args, cmd.Env = fakePath, flags, []string{"PATH=/usr/bin:/bin"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, cmd, mcpclient.Options{Name: "fake", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { stop(c) })
	return c
}

// stop stops c, giving it 10 s before SIGKILL.
func stop(c *mcpclient.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Stop(ctx)
}

// history is what the fake saw.
type history = fakebuild.History
