package main

import (
	"log"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/report"
	"github.com/snodod/snodod/bench/internal/wire"
)

// runHosted runs the hosted-server scenarios of repeat r: the
// relay overhead of each upstream (the raw peer, the hardest case: it
// costs almost nothing itself; and the Go SDK's, a real server) at every
// version, the order rotating, and, once, the sharing of the sharer (the
// TypeScript peer when it is there: what clients spawn today) among
// clients clients.
func runHosted(rep *report.Report, snodod string, upstreams []load.Server, sharer load.Server, clients, r, repeats int) {
	for _, up := range rotate(upstreams, r) {
		for _, version := range rep.Versions {
			t0 := time.Now()
			c := rep.Config.Stdio
			c.Outcomes = false
			res := load.RunRelay(snodod, up, wire.Dialect{Version: version}, c, rep.Config.DaemonEnv)
			rep.Relays = append(rep.Relays, res)
			log.Printf("[%d/%d] %s relay of %s: seq p50 %s → %s µs, %s → %s calls/s, CPU per call snodod %s, server %s µs (%s)%s", r+1, repeats, version, up.Name,
				report.Number(res.Direct.SeqP50), report.Number(res.Relayed.SeqP50), report.Number(res.Direct.CallsPerSec), report.Number(res.Relayed.CallsPerSec),
				report.Number(res.DaemonCPU), report.Number(res.UpstreamCPU), time.Since(t0).Round(time.Millisecond), problems(append(res.Problems, res.Relayed.Problems...)))
		}
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

// relayUpstreams are the hosted servers of the relay scenario: the raw
// peer and the Go SDK's, those of them in servers.
func relayUpstreams(servers []load.Server) []load.Server {
	var out []load.Server
	for _, name := range []string{"raw", "go-sdk"} {
		for _, s := range servers {
			if s.Name == name {
				out = append(out, s)
			}
		}
	}
	return out
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
