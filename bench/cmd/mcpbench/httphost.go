package main

import (
	"log"
	"os"
	"os/exec"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/report"
)

// runHTTPHosting runs the hosting scenario of repeat r: one stdio
// server (upstream, the raw peer: the fastest, so that what is measured
// is the hosts) served over Streamable HTTP by snodod serve (passed
// through at http.path/up) and by the npm gateways supergateway and
// mcp-proxy, the order rotating. A gateway that cannot be run here is
// reported n/a with the reason.
func runHTTPHosting(rep *report.Report, snodod string, upstream load.Server, nodeDir string, r, repeats int) {
	dir, err := os.MkdirTemp("", "mcpbench-hh-")
	if err != nil {
		log.Printf("http hosting: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	sn, err := load.SnododHostedHTTP(snodod, dir, upstream.Command)
	if err != nil {
		log.Printf("http hosting: %v", err)
		return
	}
	// A gateway's port is picked just before it starts, so that no other
	// has taken it since.
	node, nodeErr := exec.LookPath("node")
	gateway := func(build func(node, nodeDir string, command []string, port int) load.HTTPServer) func() load.HTTPServer {
		return func() load.HTTPServer {
			port, err := load.FreePort()
			s := build(node, nodeDir, upstream.Command, port)
			switch {
			case nodeErr != nil:
				s.Unavailable = "node not found"
			case err != nil && s.Unavailable == "":
				s.Unavailable = "no free port: " + err.Error()
			}
			return s
		}
	}
	servers := []func() load.HTTPServer{func() load.HTTPServer { return sn }, gateway(load.Supergateway), gateway(load.MCPProxy)}
	if r == 0 {
		rep.HTTPHosts = []report.Serving{
			{Name: "snodod", What: "`snodod serve --http`, the raw peer as `[mcpServers.up]` (eager, 2025-06-18 to the child, no pings), served at `http.path/up`", Command: "bin/snodod serve --http 127.0.0.1:0"},
			{Name: "supergateway", What: "npm supergateway " + orUnknown(nodePackageVersion(nodeDir, "supergateway")) + ", stateful, logging off", Command: "supergateway --stdio bench/bin/raw --outputTransport streamableHttp --stateful --port P --logLevel none"},
			{Name: "mcp-proxy", What: "npm mcp-proxy (punkpeye) " + orUnknown(nodePackageVersion(nodeDir, "mcp-proxy")) + ", stateful (its default), the stream endpoint only, no event store", Command: "mcp-proxy --port P --host 127.0.0.1 --server stream --no-eventStore -- bench/bin/raw"},
		}
	}
	c := rep.Config
	for _, server := range rotate(servers, r) {
		t0 := time.Now()
		s := server()
		res := load.RunHTTP(s, c.HTTPClients, c.HTTPPhase)
		rep.HTTPHosted = append(rep.HTTPHosted, res)
		if res.Unavailable != "" {
			log.Printf("[%d/%d] http hosting %s: n/a: %s", r+1, repeats, s.Name, res.Unavailable)
			continue
		}
		log.Printf("[%d/%d] http hosting %s: %s calls/s, CPU %s µs/call (%d processes), %d failed (%s)%s", r+1, repeats, s.Name,
			report.Number(res.CallsPerSec), report.Number(res.CPUPerCall), res.Processes, res.Errors, time.Since(t0).Round(time.Millisecond), problems(res.Problems))
	}
}

func orUnknown(version string) string {
	if version == "" {
		return "(not installed)"
	}
	return version
}
