package mcpclient

import (
	"strings"
	"testing"
)

func TestStderrRing(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		want   string
	}{
		{"fits", 16, []string{"ab", "cd"}, "abcd"},
		{"wraps", 8, []string{"abcdef", "ghij"}, "cdefghij"},
		{"one write larger than the ring", 4, []string{"abcdefgh"}, "efgh"},
		{"many small writes", 5, strings.Split("abcdefghijklmnop", ""), "lmnop"},
		{"exact size", 4, []string{"abcd"}, "abcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewStderrRing(nil, tt.size)
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := string(r.Snapshot()); got != tt.want {
				t.Errorf("Snapshot = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStderrRingTail(t *testing.T) {
	r := NewStderrRing(nil, 0)
	_, _ = r.Write([]byte("log: héllo wörld"))
	tests := []struct {
		n    int
		want string
	}{
		{100, "log: héllo wörld"},
		{6, "wörld"},
		{5, "örld"},
		{4, "rld"}, // the cut falls inside ö: moved forward to the next rune
		{0, ""},
	}
	for _, tt := range tests {
		if got := r.Tail(tt.n); got != tt.want {
			t.Errorf("Tail(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestStderrRingTailWrapped: Tail of a ring whose newest bytes wrap
// around the end of its storage.
func TestStderrRingTailWrapped(t *testing.T) {
	r := NewStderrRing(nil, 8)
	_, _ = r.Write([]byte("abcdef"))
	_, _ = r.Write([]byte("ghij")) // holds cdefghij, ij at the storage's start
	for n, want := range map[int]string{3: "hij", 6: "efghij", 8: "cdefghij", 20: "cdefghij"} {
		if got := r.Tail(n); got != want {
			t.Errorf("Tail(%d) = %q, want %q", n, got, want)
		}
	}
}

// The daemon's budget bounds what all rings hold beyond their 2 KiB
// floors; a ring that cannot grow drops its own oldest bytes; closing one
// gives its bytes back.
func TestStderrBudget(t *testing.T) {
	b := NewStderrBudget(10 << 10)
	a := NewStderrRing(b, 64<<10)
	c := NewStderrRing(b, 64<<10)
	_, _ = a.Write([]byte(strings.Repeat("a", 20<<10)))
	if got, want := len(a.Snapshot()), stderrFloorBytes+10<<10; got != want {
		t.Errorf("first ring holds %d bytes, want its floor plus the budget, %d", got, want)
	}
	if b.Used() != 10<<10 {
		t.Errorf("budget used %d, want all of it", b.Used())
	}
	_, _ = c.Write([]byte(strings.Repeat("c", 20<<10) + "END"))
	snap := c.Snapshot()
	if len(snap) != stderrFloorBytes || !strings.HasSuffix(string(snap), "END") {
		t.Errorf("second ring holds %d bytes (newest %q), want its floor with the newest bytes", len(snap), snap[len(snap)-3:])
	}
	a.Close()
	if b.Used() != 0 || len(a.Snapshot()) != 0 {
		t.Errorf("after Close: budget used %d, ring holds %d", b.Used(), len(a.Snapshot()))
	}
	_, _ = c.Write([]byte(strings.Repeat("d", 4<<10)))
	if got := len(c.Snapshot()); got != stderrFloorBytes+4<<10 {
		t.Errorf("second ring holds %d after the first gave its bytes back, want %d", got, stderrFloorBytes+4<<10)
	}
	if NewStderrBudget(0).max != DefaultStderrBudgetBytes || NewStderrRing(nil, 0).size != DefaultStderrRingBytes {
		t.Error("zero limits do not mean the defaults")
	}
}

func TestStderrFollow(t *testing.T) {
	r := NewStderrRing(nil, 0)
	_, _ = r.Write([]byte("before\n"))
	_, ch, cancel := r.Log(true)
	_, _ = r.Write([]byte("one"))
	_, _ = r.Write([]byte("two\n"))
	if got := stripStamps(string(<-ch) + string(<-ch)); got != "one"+"two\n" {
		t.Errorf("followed %q, want the writes after Log", got)
	}
	// A reader that does not read loses writes; the writer never waits.
	for range followBuffer + 10 {
		_, _ = r.Write([]byte("x"))
	}
	if len(ch) != followBuffer {
		t.Errorf("follower holds %d writes, want its buffer of %d", len(ch), followBuffer)
	}
	cancel()
	cancel()
	n := 0
	for range ch {
		n++
	}
	if n != followBuffer {
		t.Errorf("drained %d after cancel, want %d then the close", n, followBuffer)
	}
	_, _ = r.Write([]byte("after")) // no follower left: must not panic
}
