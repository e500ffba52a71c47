// Command loadgen drives one stdio MCP server with pipelined echo calls,
// for profiling: the server runs under whatever command is given (perf
// record, strace -c, valgrind …), and loadgen prints calls/s, the latency
// and the server process's CPU per call.
//
//	loadgen [-version 2026-07-28] [-calls 200000] [-inflight 64] -- bin/snodod stdio --demo
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/wire"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("loadgen: ")
	version := flag.String("version", wire.V20260728, "protocol version")
	calls := flag.Int("calls", 200000, "pipelined echo calls")
	inFlight := flag.Int("inflight", 64, "calls outstanding at once")
	warmup := flag.Int("warmup", 2000, "calls before the measured ones")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: loadgen [flags] -- command [args]")
	}
	p, err := load.Spawn(load.Server{Name: "server", Command: flag.Args()})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Kill()
	d := wire.Dialect{Version: *version}
	if err := p.Handshake(d, 30*time.Second); err != nil {
		log.Fatal(err)
	}
	if _, err := load.RunPipelined(p, d, 1, *warmup, min(*inFlight, *warmup), 10*time.Second); err != nil {
		log.Fatal(err)
	}
	res, err := load.RunPipelined(p, d, int64(*warmup+1), *calls, *inFlight, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "%d calls, %d in flight: %.0f calls/s, p50 %.0f µs, p99 %.0f µs, server CPU %.2f µs/call (user %.2f, system %.2f), %.2f switches/call, %.2f read+write/call\n",
		*calls, *inFlight, res.CallsPerSec, res.P50, res.P99, res.CPUPerCall, res.UserPerCall, res.SysPerCall, res.SwitchesPerCall, res.ReadWritePerCall)
	// The server (or the profiler it runs under) ends with its input.
	if _, killed := p.Close(30 * time.Second); killed {
		log.Print("the server did not exit within 30 s of its input ending; killed")
	}
}
