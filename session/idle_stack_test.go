package session

import (
	"bufio"
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/server/executor"
)

// idleStackLimit is what an idle session's coordinator must fit: 4 KiB.
// The runtime halves a goroutine's stack at a collection only while less
// than a quarter of it is in use, so a coordinator that needs more than
// 2 KiB while idle keeps an 8 KiB stack, and an idle session costs twice
// as much stack (BenchmarkIdleSession).
const idleStackLimit = 4 << 10

// TestIdleCoordinatorStack fails when an idle session's coordinator
// outgrows its 4 KiB stack. It measures the runtime's stack memory in use
// (runtime.MemStats.StackInuse, after collections that shrink stacks) over
// n initialized idle sessions served as the daemon serves them. An idle
// session has two goroutines: its reader, waiting in the poller on 2 or
// 4 KiB, and its coordinator, on 4 KiB while it fits. So a session holds at
// most 8 KiB of stack; a coordinator on 8 KiB makes it at least 10 KiB, and
// the line is drawn between. Under the race detector every stack is twice
// as large (stackScale), and so is the line. It measures in a process of
// its own (inFreshProcess): stacks that earlier sessions left in the
// runtime's cache would be reused without growing StackInuse.
func TestIdleCoordinatorStack(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 200 sessions")
	}
	if !inFreshProcess(t) {
		return
	}
	const n = 200
	open := serveIdle(t)
	base := stackInUse()
	open(n)
	perSession := float64(stackInUse()-base) / n
	t.Logf("stack per idle session: %.0f B", perSession)
	if limit := (2*idleStackLimit + idleStackLimit/4) * stackScale; perSession > float64(limit) {
		t.Errorf("an idle session holds %.0f B of stack, over %d B: its coordinator needs more than a quarter of %d B while idle "+
			"and keeps twice that; move work off run's frame (see Transport.Serve and coordinator.run)",
			perSession, limit, 2*idleStackLimit*stackScale)
	}
}

// serveIdle serves sessions as the daemon serves them (one supervisor,
// one executor), each on a socket pair, until the test ends: open(k)
// starts k more and leaves them idle once initialized. The clients' ends
// close (socketDevice's cleanup) before the supervisor stops.
func serveIdle(t *testing.T) (open func(k int)) {
	cat := newCatalog(t)
	exec, err := executor.New(executor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Close)
	ctx, cancel := context.WithCancel(context.Background())
	sup := suture.NewSimple("idle")
	supDone := sup.ServeBackground(ctx)
	t.Cleanup(func() {
		cancel()
		<-supDone
	})
	id := uint64(0)
	return func(k int) {
		for range k {
			dev, client := socketDevice(t, Peer{})
			sup.Add(New(id, dev, Config{Dispatcher: cat, Executor: exec}))
			id++
			if _, err := io.WriteString(client.w, initialize("2025-06-18")+"\n"); err != nil {
				t.Fatal(err)
			}
			if _, err := bufio.NewReader(client.r).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stackInUse is the goroutine stack memory in use after collections, which
// shrink the stacks that use less than a quarter of their size.
func stackInUse() uint64 {
	for range 3 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}
