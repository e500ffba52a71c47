package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkSpawn measures a server's start: from Wrap (or, plainly, from
// exec.Cmd.Start) to the first byte of its output (the attacker's "hello"
// mode writes one at once). Each iteration starts the server plainly and
// through the launcher, one after the other, so that the machine's load
// (shared here) weighs on both alike; it reports the medians and the
// median of the differences, "added-ms", whose goal is at most 5 ms
// (docs/security.md, "Sandbox"). The teardown (stdin's end, the exit, the
// namespaces' release) is not timed. The launcher is a built snodod, as
// in production (its size and its packages' initialisation count).
//
//	go test -run '^$' -bench Spawn -benchtime 200x ./internal/sandbox
func BenchmarkSpawn(b *testing.B) {
	home := filepath.Join(b.TempDir(), "home")
	snodod := filepath.Join(b.TempDir(), "snodod")
	if out, err := exec.Command("go", "build", "-o", snodod, "github.com/snodod/snodod/cmd/snodod").CombinedOutput(); err != nil {
		b.Fatalf("build snodod: %v\n%s", err, out)
	}
	Probe() // once per process, not per start
	for _, bc := range []struct {
		name   string
		policy Policy
	}{
		{"standard", Policy{Level: Standard, Home: home}},
		{"standard-shared-pids", Policy{Level: Standard, Home: home, SharePIDs: true}},
		{"strict", Policy{Level: Strict, Home: home}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			launcherPath = snodod
			defer func() { launcherPath = "/proc/self/exe" }()
			var plain, boxed, added, wraps []time.Duration
			for b.Loop() {
				p := spawnOnce(b, nil)
				s := spawnOnce(b, &bc.policy)
				wraps = append(wraps, wrapTook)
				plain, boxed, added = append(plain, p), append(boxed, s), append(added, s-p)
			}
			b.ReportMetric(median(plain), "plain-ms")
			b.ReportMetric(median(boxed), "sandboxed-ms")
			b.ReportMetric(median(added), "added-ms")
			b.ReportMetric(median(wraps), "wrap-ms")
		})
	}
}

var wrapTook time.Duration

// median in milliseconds.
func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// spawnOnce starts the hello server (under p when not nil) and returns the
// time to its first byte.
func spawnOnce(b *testing.B, p *Policy) time.Duration {
	b.StopTimer()
	cmd := exec.Command(attackerPath, "hello")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.SysProcAttr = sysProcAttrGroup()
	b.StartTimer()
	began := time.Now()
	var l *Launch
	if p != nil {
		var err error
		if l, err = Wrap(cmd, *p); err != nil {
			b.Fatal(err)
		}
	}
	wrapTook = time.Since(began)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	inR.Close()
	outW.Close()
	one := make([]byte, 1)
	if _, err := outR.Read(one); err != nil {
		b.Fatal(err)
	}
	took := time.Since(began)
	b.StopTimer()
	if l != nil {
		if _, err := l.Started(); err != nil {
			b.Fatal(err)
		}
	}
	inW.Close()
	err := cmd.Wait()
	if l != nil {
		err = l.Exited(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	outR.Close()
	b.StartTimer()
	return took
}
