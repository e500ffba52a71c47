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

	"github.com/snodod/snodod/server/executor"
)

// BenchmarkIdleSession reports what an idle session holds: heap and
// goroutine stacks per session (B/session) and goroutines per session,
// measured over 2,000 initialized sessions on socket pairs, as the daemon
// serves them. It is the idle-session goal of docs/bench.md ("Goals") at
// the level of the package; bench/ measures the daemon's RSS.
func BenchmarkIdleSession(b *testing.B) {
	const n = 2000
	cat := newCatalog(b)
	exec, err := executor.New(executor.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Close()
	for b.Loop() {
		beforeHeap, beforeStack := memInUse()
		goroutines := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		sup := suture.NewSimple("idle")
		supDone := sup.ServeBackground(ctx)
		conns := make([]net.Conn, 0, n)
		for range n {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			f := os.NewFile(uintptr(fds[0]), "socket")
			dev, err := NewDevice(f, f, Peer{})
			if err != nil {
				b.Fatal(err)
			}
			sup.Add(New(uint64(len(conns)), dev, Config{Dispatcher: cat, Executor: exec}))
			cf := os.NewFile(uintptr(fds[1]), "client")
			conn, err := net.FileConn(cf)
			cf.Close()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Write([]byte(initialize("2025-06-18") + "\n")); err != nil {
				b.Fatal(err)
			}
			if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, conn)
		}
		afterHeap, afterStack := memInUse()
		b.ReportMetric(float64(afterHeap+afterStack-beforeHeap-beforeStack)/n, "B/session")
		b.ReportMetric(float64(afterStack-beforeStack)/n, "stack-B/session")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/session")
		for _, c := range conns {
			c.Close()
		}
		cancel()
		<-supDone
	}
}

// memInUse is the heap and stack memory in use after a collection.
func memInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}
