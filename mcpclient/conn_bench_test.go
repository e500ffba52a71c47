package mcpclient

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
)

// The Conn's overhead against the fake upstream's echo tool. Direct is the
// floor: the same request written and its answer read on bare pipes, with
// no Conn (one line in, one line out, nothing parsed). Besides the time,
// each reports this process's CPU and context switches per call (its
// rusage: the fake upstream, a child, is not counted), which a busy
// machine disturbs less than the time.
//
//	go test -run '^$' -bench Conn -benchtime 2s ./upstream

var echoParams = []byte(`{"name":"echo","arguments":{"text":"hello"}}`)

// usage reports this process's CPU time and context switches per op
// since it was made (at its call), when the benchmark ends.
func usage(b *testing.B) func() {
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	return func() {
		var after syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		switches := after.Nvcsw + after.Nivcsw - before.Nvcsw - before.Nivcsw
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
		b.ReportMetric(float64(switches)/float64(b.N), "switches/op")
	}
}

func BenchmarkConnSequential(b *testing.B) {
	c := startFake(b, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	defer usage(b)()
	for b.Loop() {
		if _, err := c.Call(ctx, "tools/call", echoParams, CallOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnSequentialSandboxed is BenchmarkConnSequential with the
// fake upstream in the standard sandbox (docs/security.md, "Sandbox"):
// the goal is no measurable cost per call (its seccomp filter, Landlock
// and namespaces are on the server's side; the pipes are the same).
func BenchmarkConnSequentialSandboxed(b *testing.B) {
	cmd := fakeCommand()
	cmd.Sandbox = sandbox.Policy{Level: sandbox.Standard, Home: b.TempDir() + "/home"}
	c := startCommand(b, cmd, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	defer usage(b)()
	for b.Loop() {
		if _, err := c.Call(ctx, "tools/call", echoParams, CallOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDirectSequential(b *testing.B) {
	cmd := exec.Command(fakePath, "-no-strict-ids")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	out := bufio.NewReader(outPipe)
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + string(echoParams) + "}\n")
	defer usage(b)()
	for b.Loop() {
		if _, err := in.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnPipelined keeps 64 calls in flight from 64 goroutines and
// reports calls per second.
func BenchmarkConnPipelined(b *testing.B) {
	c := startFake(b, Options{})
	ctx := context.Background()
	const callers = 64
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan struct{}, callers)
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range work {
				if _, err := c.Call(ctx, "tools/call", echoParams, CallOptions{}); err != nil {
					errs <- fmt.Errorf("call: %w", err)
					return
				}
			}
		})
	}
	b.ResetTimer()
	report := usage(b)
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	report()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
