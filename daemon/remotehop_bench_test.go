package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
)

// BenchmarkRemoteHop is the remote hop's latency (docs/bench.md, "Remote servers") in one process: the Go
// SDK's client calling echo on a stateless Streamable HTTP server (the Go
// SDK's, JSON responses, as bench/peers/gosdkhttp serves it) on loopback,
// directly and through a daemon hosting it as "remote" (the client's pipes
// passed over the control socket, as `snodod connect remote` passes them).
// Each iteration is rounds of calls on each path in turn, so that both see
// the same machine; it reports each one's p50 and the added p50 of the hop
// (docs/bench.md, "Remote servers": the goal is 100 µs).
func BenchmarkRemoteHop(b *testing.B) {
	const rounds, perRound = 10, 200
	var conns atomic.Int64
	direct, hopped := remoteHop(b, nil, &conns)
	call := func(cs *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 100 { // warm both up
		call(direct)
		call(hopped)
	}
	var dl, hl []time.Duration
	for b.Loop() {
		for range rounds {
			for range perRound {
				dl = append(dl, call(direct))
			}
			for range perRound {
				hl = append(hl, call(hopped))
			}
		}
	}
	// Keep-alive: the calls reuse their connections (each client's one,
	// the daemon's for calls and its listen stream, which it may reopen).
	if n := conns.Load(); n > int64(len(hl)/100) {
		b.Errorf("the server saw %d connections for %d calls on each path; want them reused", n, len(hl))
	}
	b.ReportMetric(float64(conns.Load()), "server-conns")
	dp, hp := p50(dl), p50(hl)
	b.ReportMetric(float64(dp.Nanoseconds())/1e3, "direct-p50-µs")
	b.ReportMetric(float64(hp.Nanoseconds())/1e3, "snodod-p50-µs")
	b.ReportMetric(float64((hp-dp).Nanoseconds())/1e3, "added-p50-µs")
}

// remoteHop starts the server (its handler wrapped by wrap, when set) and
// a daemon hosting it until the benchmark ends, and returns the Go SDK's
// client connected to it directly and through the daemon.
func remoteHop(b *testing.B, wrap func(http.Handler) http.Handler, conns *atomic.Int64) (direct, hopped *mcp.ClientSession) {
	b.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "peer", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	b.Cleanup(ts.Close)

	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf("[daemon]\nsocket = %q\nshutdown_grace = \"10s\"\n\n[mcpServers.remote]\nurl = %q\nping_interval = \"0s\"\n",
		filepath.Join(dir, "s.sock"), ts.URL)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(cfg, Options{Logger: testLogger(), Catalog: demo, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	<-d.Ready()

	direct = connectSDK(b, &mcp.StreamableClientTransport{Endpoint: ts.URL})
	b.Cleanup(func() { direct.Close() })
	// The daemon's ends of two pipes, as a client's child has them.
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	ho, err := (&control.Client{Socket: cfg.Daemon.ControlSocket}).Connect(ctx, inR, outW, control.ConnectOptions{View: "remote", Cwd: dir})
	if err != nil {
		b.Fatal(err)
	}
	inR.Close()
	outW.Close()
	hopped = connectSDK(b, &mcp.IOTransport{Reader: outR, Writer: inW})
	b.Cleanup(func() {
		hopped.Close()
		ho.Close()
	})
	return direct, hopped
}

func connectSDK(b *testing.B, t mcp.Transport) *mcp.ClientSession {
	b.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), t, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

func p50(lat []time.Duration) time.Duration {
	slices.Sort(lat)
	return lat[len(lat)/2]
}
