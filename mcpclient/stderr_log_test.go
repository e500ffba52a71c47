package mcpclient

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// stampRE matches a line's time as StderrRing.Log renders it.
var stampRE = regexp.MustCompile(`(?m)^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)|-+) `)

// stripStamps removes the times at the lines' starts.
func stripStamps(s string) string { return stampRE.ReplaceAllString(s, "") }

// The synctest clock starts at midnight UTC, 2000-01-01.
func at(d time.Duration) string {
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(d).Local().Format(stampLayout)
}

// `snodod logs NAME` shows each line after the time it was written, and a
// mark at each start, whatever the writes' boundaries (docs/upstreams.md
// §8).
func TestStderrLogStamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewStderrRing(nil, 0)
		r.Mark("snodod: starting fake (instance all)")
		time.Sleep(time.Second)
		_, _ = r.Write([]byte("one\ntw"))
		time.Sleep(time.Second)
		_, _ = r.Write([]byte("o\nthree"))          // "two" began a second earlier
		r.Mark("snodod: fake exited with status 1") // mid-line: the mark gets a line of its own
		time.Sleep(time.Second)
		_, _ = r.Write([]byte("four\n"))
		held, _, _ := r.Log(false)
		want := fmt.Sprintf("%s --- snodod: starting fake (instance all) ---\n%s one\n%s two\n%s three\n%s --- snodod: fake exited with status 1 ---\n%s four\n",
			at(0), at(time.Second), at(time.Second), at(2*time.Second), at(2*time.Second), at(3*time.Second))
		if got := string(held); got != want {
			t.Errorf("Log:\n%s\nwant\n%s", got, want)
		}
		// The bytes themselves are the server's: the tail an error
		// quotes has no times.
		if got := r.Tail(100); got != "one\ntwo\nthreefour\n" {
			t.Errorf("Tail = %q", got)
		}
	})
}

// A follower sees what Log would show, piece by piece.
func TestStderrLogFollowStamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewStderrRing(nil, 0)
		_, _ = r.Write([]byte("half"))
		held, ch, cancel := r.Log(true)
		defer cancel()
		time.Sleep(time.Second)
		_, _ = r.Write([]byte(" line\nnext\n"))
		r.Mark("snodod: starting fake (instance all)")
		var b strings.Builder
		b.Write(held)
		b.Write(<-ch)
		b.Write(<-ch)
		want := fmt.Sprintf("%s half line\n%s next\n%s --- snodod: starting fake (instance all) ---\n", at(0), at(time.Second), at(time.Second))
		if b.String() != want {
			t.Errorf("followed:\n%s\nwant\n%s", b.String(), want)
		}
		final, _, _ := r.Log(false)
		if string(final) != want {
			t.Errorf("Log after:\n%s\nwant what the follower saw", final)
		}
	})
}

// Times are kept for the bytes held only, and at most maxStamps of them:
// the oldest lines then show the oldest time kept, never none.
func TestStderrLogStampBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewStderrRing(nil, 4<<10)
		start := time.Duration(3*maxStamps) * time.Millisecond // when big's writes begin
		for i := range 3 * maxStamps {
			_, _ = r.Write([]byte(fmt.Sprintf("%d\n", i%10)))
			time.Sleep(time.Millisecond)
		}
		if len(r.marks) > maxStamps {
			t.Errorf("%d marks kept, want at most %d", len(r.marks), maxStamps)
		}
		held, _, _ := r.Log(false)
		lines := strings.Split(strings.TrimSuffix(string(held), "\n"), "\n")
		if len(lines) != r.n/2 {
			t.Fatalf("%d lines for %d bytes", len(lines), r.n)
		}
		for _, l := range lines {
			if !stampRE.MatchString(l) || strings.HasPrefix(l, "-") {
				t.Fatalf("line without a time: %q", l)
			}
		}
		last := at(time.Duration(3*maxStamps-1) * time.Millisecond)
		if !strings.HasPrefix(lines[len(lines)-1], last) {
			t.Errorf("newest line %q, want the time %s", lines[len(lines)-1], last)
		}
		// The ring of 4 KiB holds 2048 lines, within maxStamps: each
		// line has its own time.
		if first := at(time.Duration(3*maxStamps-len(lines)) * time.Millisecond); !strings.HasPrefix(lines[0], first) {
			t.Errorf("oldest line %q, want the time %s", lines[0], first)
		}

		// A ring that holds more writes than maxStamps: the lines older
		// than the oldest time kept show the newest time dropped.
		big := NewStderrRing(nil, 64<<10)
		for range maxStamps + 10 {
			_, _ = big.Write([]byte("x\n"))
			time.Sleep(time.Millisecond)
		}
		if len(big.marks) != maxStamps {
			t.Errorf("%d marks kept, want %d", len(big.marks), maxStamps)
		}
		held, _, _ = big.Log(false)
		lines = strings.Split(strings.TrimSuffix(string(held), "\n"), "\n")
		if len(lines) != maxStamps+10 || !strings.HasPrefix(lines[0], at(start+9*time.Millisecond)) || !strings.HasPrefix(lines[10], at(start+10*time.Millisecond)) {
			t.Errorf("%d lines; the first %q, the 11th %q", len(lines), lines[0], lines[10])
		}
	})
}
