package load

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/snodod/snodod/bench/internal/stats"
	"github.com/snodod/snodod/bench/internal/wire"
)

// UpgradePause is what sessions calling across a `snodod upgrade` saw.
type UpgradePause struct {
	Sessions int
	Every    time.Duration // each session's pace: a call per Every
	// Upgrade is how long `snodod upgrade` took, from its start to its
	// exit (the new daemon serves every session then).
	Upgrade time.Duration
	// Before are the latencies of the calls answered before the upgrade
	// began; Across those of the calls sent before it ended and answered
	// after it began: every call it delayed.
	Before, Across stats.Latencies
	CallsBefore    int
	CallsAcross    int
	MaxAcross      time.Duration // the longest wait a call saw across it
	Failed         int
	Problems       []string
}

// RunUpgradePause opens sessions sessions of d, has each send an echo call
// every every (one at a time, so a call waits for the one before), runs
// `bin upgrade` once they have run for warm, and goes on for as long after
// it. It leaves the new daemon running and returns its pid.
func RunUpgradePause(d *Daemon, bin string, dialect wire.Dialect, sessions int, every, warm time.Duration) (UpgradePause, int) {
	r := UpgradePause{Sessions: sessions, Every: every}
	ss, err := d.openMany(sessions, dialect)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r, 0
	}
	defer closeAll(ss)
	type sample struct {
		sent time.Time
		took time.Duration
	}
	samples := make([][]sample, sessions)
	failed := make([]int, sessions)
	problems := make([]string, sessions)
	stop := make(chan struct{})
	done := make(chan struct{})
	t0 := time.Now()
	for i, s := range ss {
		go func() {
			defer func() { done <- struct{}{} }()
			// Sessions start spread over the first period.
			next := t0.Add(every * time.Duration(i) / time.Duration(sessions))
			var buf []byte
			for id := int64(1); ; id++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(every)
				buf = dialect.Echo(buf[:0], id)
				sent := time.Now()
				l, err := s.Call(buf, id, 60*time.Second)
				if err != nil {
					failed[i]++
					problems[i] = fmt.Sprintf("session %d: %v", i, err)
					return
				}
				if what := CheckEcho(l, id); what != "" {
					failed[i]++
					problems[i] = fmt.Sprintf("session %d call %d: %s", i, id, what)
					continue
				}
				samples[i] = append(samples[i], sample{sent: sent, took: l.At.Sub(sent)})
			}
		}()
	}
	time.Sleep(warm)
	began := time.Now()
	cmd := exec.Command(bin, "upgrade", "--control-socket", d.Control(), "--socket", d.Socket)
	out, err := cmd.CombinedOutput()
	ended := time.Now()
	r.Upgrade = ended.Sub(began)
	pid := 0
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("snodod upgrade: %v: %s", err, out))
	} else if _, err := fmt.Sscanf(string(out), "upgraded: the daemon is now pid %d", &pid); err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("snodod upgrade printed %q", out))
	}
	time.Sleep(warm)
	close(stop)
	for range ss {
		<-done
	}
	var before, across []time.Duration
	for i := range samples {
		for _, s := range samples[i] {
			switch {
			case s.sent.Add(s.took).Before(began):
				before = append(before, s.took)
			case s.sent.Before(ended): // answered after the upgrade began
				across = append(across, s.took)
				r.MaxAcross = max(r.MaxAcross, s.took)
			}
		}
		r.Failed += failed[i]
		if problems[i] != "" && len(r.Problems) < 10 {
			r.Problems = append(r.Problems, problems[i])
		}
	}
	r.Before, r.Across = stats.Summarise(before), stats.Summarise(across)
	r.CallsBefore, r.CallsAcross = len(before), len(across)
	return r, pid
}

// StopSuccessor ends the daemon an upgrade started (pid, not this
// process's child): SIGTERM, then up to 15 s for it to be gone.
func StopSuccessor(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if exited(pid) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Errorf("the new daemon (pid %d) did not exit within 15 s of SIGTERM", pid)
}
