//go:build unix

package framing

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// drainReadBuffers empties the lists of free read buffers.
func drainReadBuffers() {
	for i := range readBuffers {
		l := &readBuffers[i]
		l.mu.Lock()
		l.free = nil
		l.mu.Unlock()
	}
}

// freeReadBuffers is how many small and large read buffers are free.
func freeReadBuffers() (small, large int) {
	count := func(l *bufferList) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.free)
	}
	return count(&readBuffers[0]), count(&readBuffers[1])
}

// A Splitter on a pollable device holds a read buffer only while it reads:
// waiting for the next line, it has given it back. A small buffer serves a
// short line; a line that fills it is read on with a large one.
func TestIdleSplitterHoldsNoReadBuffer(t *testing.T) {
	for _, tc := range []struct {
		name         string
		text         int
		small, large int // free once the Splitter waits again
	}{
		{"short line", 10, 1, 0},
		{"long line", 20_000, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var count atomic.Int64
			s := NewSplitter(NewSource(pr, 1<<20+1), 1<<20, &count, nil)
			batches := make(chan []Event)
			go func() {
				defer close(batches)
				for {
					evs := s.Batch()
					batches <- evs
					if k := evs[len(evs)-1].Kind; k != KindLine {
						return
					}
				}
			}()
			drainReadBuffers()
			if _, err := pw.WriteString(strings.Repeat("x", tc.text) + "\n"); err != nil {
				t.Fatal(err)
			}
			if evs := <-batches; len(evs) != 1 || len(evs[0].Data) != tc.text {
				t.Fatalf("got %+v, want one line of %d bytes", evs, tc.text)
			}
			var small, large int
			if !eventually.Within(eventually.Timeout, func() bool {
				small, large = freeReadBuffers()
				return small == tc.small && large == tc.large
			}) {
				t.Fatalf("free read buffers: %d small, %d large; want %d and %d", small, large, tc.small, tc.large)
			}
			pw.Close()
			for range batches {
			}
			pr.Close()
		})
	}
}

// TestReadAndTryDoNotAllocate: a read of a descriptor with input waiting,
// and a non-blocking write that the descriptor takes, allocate nothing
// (each would otherwise make a closure for the runtime's poller, once per
// batch of lines and per batch of frames).
func TestReadAndTryDoNotAllocate(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	src := newSource(r, 1<<20)
	out := NewWriter(w, 0)
	if !out.Direct() {
		t.Fatal("a pipe is not written directly")
	}
	line := []byte("{}\n")
	step := func() {
		if n, err := out.Try(line); n != len(line) || err != nil {
			t.Fatalf("Try: %d, %v", n, err)
		}
		if b, err := src.Read(); string(b) != string(line) || err != nil {
			t.Fatalf("Read: %q, %v", b, err)
		}
	}
	step() // the first read binds its function
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Fatalf("%v allocations per write and read, want 0", n)
	}
}
