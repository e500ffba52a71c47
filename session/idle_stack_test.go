package session

import (
	"bufio"
	"context"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
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
// n initialized idle sessions served as the daemon serves them, and
// subtracts the same measure over n bare input readers, the session's
// other goroutine: what is left is the coordinators' stacks. Between
// 4 KiB and 8 KiB a coordinator is one or the other, so the line is drawn
// half-way. Under the race detector every stack is twice as large
// (stackScale), and so is the line.
func TestIdleCoordinatorStack(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 200 sessions")
	}
	const n = 200
	pair := func() (*Device, net.Conn) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(fds[0]), "socket")
		dev, err := NewDevice(f, f, Peer{})
		if err != nil {
			t.Fatal(err)
		}
		cf := os.NewFile(uintptr(fds[1]), "client")
		conn, err := net.FileConn(cf)
		cf.Close()
		if err != nil {
			t.Fatal(err)
		}
		return dev, conn
	}

	// The readers alone.
	base := stackInUse()
	readers := make([]*stdio.Reader, 0, n)
	var devs []*Device
	var conns []net.Conn
	for range n {
		dev, conn := pair()
		readers = append(readers, stdio.NewReader(dev.input(), 0))
		devs, conns = append(devs, dev), append(conns, conn)
	}
	perReader := float64(stackInUse()-base) / n
	for i := range readers {
		readers[i].Close()
		conns[i].Close()
		devs[i].Close()
	}

	// Idle sessions: reader and coordinator.
	cat := newCatalog(t)
	exec, err := server.NewExecutor(server.ExecutorLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sup := suture.NewSimple("idle")
	supDone := sup.ServeBackground(ctx)
	defer func() {
		cancel()
		<-supDone
	}()
	base = stackInUse()
	conns = conns[:0]
	for i := range n {
		dev, conn := pair()
		sup.Add(New(uint64(i), dev, Config{Dispatcher: cat, Executor: exec}))
		if _, err := conn.Write([]byte(initialize("2025-06-18") + "\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	perSession := float64(stackInUse()-base) / n
	for _, c := range conns {
		defer c.Close()
	}
	perCoordinator := perSession - perReader
	t.Logf("stack per idle session %.0f B: reader %.0f B, coordinator %.0f B", perSession, perReader, perCoordinator)
	if limit := idleStackLimit * stackScale; perCoordinator > float64(limit*3/2) {
		t.Errorf("an idle coordinator holds %.0f B of stack, more than its %d B: it needs more than a quarter of twice that while idle; "+
			"move work off run's frame (see Transport.Serve and coordinator.run)", perCoordinator, limit)
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
