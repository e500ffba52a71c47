// Command hopcompare measures the added p50 of snodod's remote hop
// (docs/bench.md, "Remote servers") for several snodod binaries
// side by side: one local stateless Streamable HTTP server (the Go SDK's,
// bench/peers/gosdkhttp), the Go SDK's client calling echo on it directly
// over HTTP, and one more such client through each binary (a daemon of its
// own hosting the server as "remote", the client through `snodod connect
// remote`). The clients call in turn, rounds of sequential calls each, so
// that every path sees the same machine; it prints each one's p50, the
// added p50 over the direct client and its daemon's CPU per call.
//
//	hopcompare -server bin/gosdkhttp [-rounds 10] [-per 200] SNODOD[,ENV=VALUE ...] ...
//
// A binary's ENV=VALUE pairs (after commas) are set for its daemon only,
// GOMAXPROCS=1 for instance.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/bench/internal/load"
)

// path is one way to the server.
type path struct {
	name string
	pid  int // its daemon's; 0 for the direct client
	cs   *mcp.ClientSession
	lat  []time.Duration
	cpu  float64 // seconds of its daemon's, over the rounds
}

func main() {
	server := flag.String("server", "bin/gosdkhttp", "the Go SDK's streamable HTTP peer")
	rounds := flag.Int("rounds", 10, "rounds of calls on each path in turn")
	per := flag.Int("per", 200, "sequential calls of a path in each round")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: hopcompare [-server bin/gosdkhttp] SNODOD[,ENV=VALUE ...] ...")
	}
	srv := exec.Command(*server, "-addr", "127.0.0.1:0")
	out, err := srv.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		log.Fatalf("the server printed %q: %v", line, err)
	}
	url := "http://" + addr + "/mcp"
	paths := []*path{{name: "direct", cs: connect(&mcp.StreamableClientTransport{Endpoint: url})}}
	for _, arg := range flag.Args() {
		bin, env, _ := strings.Cut(arg, ",")
		p, stop := throughDaemon(bin, strings.Split(env, ","), url)
		defer stop()
		p.name = filepath.Base(bin) + strings.TrimSuffix(" "+env, " ")
		paths = append(paths, p)
	}
	for _, p := range paths {
		for range 100 { // warm-up
			call(p.cs)
		}
	}
	load0 := loadAvg()
	for range *rounds {
		for _, p := range paths {
			c0 := cpuOf(p.pid)
			for range *per {
				p.lat = append(p.lat, call(p.cs))
			}
			p.cpu += cpuOf(p.pid) - c0
		}
	}
	fmt.Printf("load average %s at the start, %s at the end; %d rounds of %d calls per path\n", load0, loadAvg(), *rounds, *per)
	direct := p50(paths[0].lat)
	for _, p := range paths {
		m := p50(p.lat)
		fmt.Printf("%-32s p50 %7.1f µs", p.name, us(m))
		if p.pid != 0 {
			fmt.Printf("  added %6.1f µs  daemon CPU per call %6.1f µs", us(m-direct), p.cpu*1e6/float64(len(p.lat)))
		}
		fmt.Println()
	}
	for _, p := range paths {
		p.cs.Close()
	}
}

// throughDaemon starts a daemon of bin hosting url as "remote" (env
// added to its environment) and connects a client through it.
func throughDaemon(bin string, env []string, url string) (*path, func()) {
	dir, err := os.MkdirTemp("", "hopcompare-")
	if err != nil {
		log.Fatal(err)
	}
	conf := fmt.Sprintf("[mcpServers.remote]\nurl = %q\nping_interval = \"0s\"\n", url)
	if err = os.MkdirAll(filepath.Join(dir, "snodod"), 0o700); err == nil {
		err = os.WriteFile(filepath.Join(dir, "snodod", "config.toml"), []byte(conf), 0o600)
	}
	if err != nil {
		log.Fatal(err)
	}
	env = slices.DeleteFunc(env, func(s string) bool { return s == "" })
	d, err := load.StartDaemon(bin, 16, append([]string{"XDG_CONFIG_HOME=" + dir, "XDG_STATE_HOME=" + dir}, env...))
	if err != nil {
		log.Fatal(err)
	}
	cs := connect(&mcp.CommandTransport{Command: exec.Command(bin, "connect", "--control-socket", d.Control(), "remote")})
	return &path{pid: d.PID(), cs: cs}, func() {
		d.Stop()
		os.RemoveAll(dir)
	}
}

func connect(t mcp.Transport) *mcp.ClientSession {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hopcompare", Version: "1"}, nil).Connect(ctx, t, nil)
	if err != nil {
		log.Fatal(err)
	}
	return cs
}

func call(cs *mcp.ClientSession) time.Duration {
	t0 := time.Now()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		log.Fatal(err)
	}
	return time.Since(t0)
}

func p50(lat []time.Duration) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuOf is the CPU time of process pid (utime and stime, /proc/PID/stat),
// in seconds; 0 for pid 0.
func cpuOf(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+2:]))
	var user, sys float64
	fmt.Sscan(f[11], &user)
	fmt.Sscan(f[12], &sys)
	return (user + sys) / 100 // USER_HZ
}
