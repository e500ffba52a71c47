package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The ring keeps whole lines within its bytes, exactly: at the bound all
// stay, one byte more drops the oldest line.
func TestLogRingBound(t *testing.T) {
	r := newLogRing(30)
	for _, l := range []string{"aaaaaaaaa\n", "bbbbbbbbb\n", "ccccccccc\n"} { // 30 bytes
		_, _ = r.Write([]byte(l))
	}
	if held, _, _ := r.snapshot(false); string(held) != "aaaaaaaaa\nbbbbbbbbb\nccccccccc\n" {
		t.Errorf("at the bound: %q", held)
	}
	_, _ = r.Write([]byte("d\n"))
	if held, _, _ := r.snapshot(false); string(held) != "bbbbbbbbb\nccccccccc\nd\n" {
		t.Errorf("past it: %q, want the oldest line dropped", held)
	}
	// A line longer than the ring keeps its first bytes, alone.
	_, _ = r.Write([]byte(strings.Repeat("e", 40) + "\n"))
	if held, _, _ := r.snapshot(false); string(held) != strings.Repeat("e", 30) {
		t.Errorf("a long line: %q", held)
	}
	if newLogRing(0).max != DefaultLogRingBytes {
		t.Errorf("the default size is %d, want %d", newLogRing(0).max, DefaultLogRingBytes)
	}
}

// The daemon's logger writes what its handler takes to the ring too, as
// text, attributes included; what the handler's level leaves out, the
// ring does not keep either. A follower gets the lines after its start.
func TestLogRingTee(t *testing.T) {
	r := newLogRing(0)
	var base bytes.Buffer
	log := slog.New(r.tee(slog.NewJSONHandler(&base, &slog.HandlerOptions{Level: slog.LevelInfo}))).With("session", 3)
	log.Debug("left out")
	log.Info("kept", "n", 1)
	held, ch, cancel := r.snapshot(true)
	log.Warn("followed")
	if s := string(held); !strings.Contains(s, `level=INFO msg=kept session=3 n=1`) || strings.Contains(s, "left out") || strings.Count(s, "\n") != 1 {
		t.Errorf("the ring holds %q", s)
	}
	if got := string(<-ch); !strings.Contains(got, `level=WARN msg=followed session=3`) {
		t.Errorf("followed %q", got)
	}
	cancel()
	cancel()
	if _, ok := <-ch; ok {
		t.Error("the channel is open after cancel")
	}
	log.Info("after") // no follower left: must not block or panic
	if strings.Count(base.String(), "\n") != 3 || strings.Contains(base.String(), "left out") {
		t.Errorf("the base handler got:\n%s", base.String())
	}
}
