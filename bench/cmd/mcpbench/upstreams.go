package main

import (
	"log"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/report"
	"github.com/snodod/snodod/bench/internal/wire"
)

// runHosted runs the hosted-server scenarios (issue 10) of repeat r: the
// relay overhead of the raw peer at every version, and, once, the sharing
// of the sharer (the TypeScript peer when it is there: what clients spawn
// today) among clients clients.
func runHosted(rep *report.Report, snodod string, raw, sharer load.Server, clients, r, repeats int) {
	for _, version := range rep.Versions {
		t0 := time.Now()
		c := rep.Config.Stdio
		c.Outcomes = false
		res := load.RunRelay(snodod, raw, wire.Dialect{Version: version}, c, rep.Config.DaemonEnv)
		rep.Relays = append(rep.Relays, res)
		log.Printf("[%d/%d] %s relay: seq p50 %s → %s µs, %s → %s calls/s, CPU per call snodod %s, server %s µs (%s)%s", r+1, repeats, version,
			report.Number(res.Direct.SeqP50), report.Number(res.Relayed.SeqP50), report.Number(res.Direct.CallsPerSec), report.Number(res.Relayed.CallsPerSec),
			report.Number(res.DaemonCPU), report.Number(res.UpstreamCPU), time.Since(t0).Round(time.Millisecond), problems(append(res.Problems, res.Relayed.Problems...)))
	}
	if r > 0 || clients <= 0 {
		return
	}
	t0 := time.Now()
	s := load.RunSharing(snodod, sharer, wire.Dialect{Version: wire.V20250618}, clients, rep.Config.DaemonEnv)
	rep.Sharings = append(rep.Sharings, s)
	log.Printf("sharing %d clients of %s: copies %s MiB, last first answer %s ms; shared %s MiB (+ %s MiB of connect processes), %s ms (%s)%s",
		clients, s.Server, report.MiB(s.CopiesRSS), report.Number(s.CopiesLastMs), report.MiB(s.SharedRSS), report.MiB(s.ConnectRSS),
		report.Number(s.SharedLastMs), time.Since(t0).Round(time.Millisecond), problems(s.Problems))
}

// peerOf returns the server called name.
func peerOf(servers []load.Server, name string) load.Server {
	for _, s := range servers {
		if s.Name == name {
			return s
		}
	}
	log.Fatalf("no %s server", name)
	return load.Server{}
}

// sharer is the server of the sharing scenario: the TypeScript peer, else
// the Go SDK's.
func sharer(servers []load.Server) load.Server {
	for _, name := range []string{"ts-sdk", "go-sdk"} {
		for _, s := range servers {
			if s.Name == name {
				return s
			}
		}
	}
	return servers[0]
}
