package framing

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"
)

// chunkedReader returns data in reads of the sizes sizes gives, cycling
// through them (a size of 0 is a read of 1 byte): the device's chunking,
// chosen by the fuzzer.
type chunkedReader struct {
	data  []byte
	sizes []byte
	next  int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = max(1, int(r.sizes[r.next%len(r.sizes)]))
		r.next++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// wantEvents is what docs/transport.md §3 says a Splitter with limit makes of
// data: each LF-terminated line is accepted when its length, LF included,
// is at most the limit; a last line without LF when its length is at most
// the limit; every other line is one refusal; then the end of input.
func wantEvents(data []byte, limit int) []Event {
	var evs []Event
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line, size := data, len(data)
		if i >= 0 {
			line, size = data[:i], i+1
			data = data[i+1:]
		} else {
			data = nil
		}
		if size > limit {
			evs = append(evs, Event{Kind: KindOversize})
		} else {
			evs = append(evs, Event{Kind: KindLine, Data: line})
		}
	}
	return append(evs, Event{Kind: KindEOF})
}

// FuzzSplitter checks that the Splitter's lines do not depend on
// how the device chunks its bytes, that they are exactly what
// docs/transport.md §3 says, that no batch exceeds MaxBatchLines, and that the
// Splitter never holds more than the limit of an unfinished line.
func FuzzSplitter(f *testing.F) {
	for _, seed := range []struct {
		data  string
		limit uint16
		sizes string
	}{
		{"123456789\n1234567890\n", 10, "\x03"},
		{"1234567890", 10, "\x01"},
		{"12345678901", 10, "\x05\x07"},
		{"\n\n\r\n  \n{}\n", 4, ""},
		{"aaaaaaaaaaaaaaaaaaaa\nb\n", 8, "\x02\x20"},
		{"x\ny\nz", 2, "\xff"},
	} {
		f.Add([]byte(seed.data), seed.limit, []byte(seed.sizes))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit16 uint16, sizes []byte) {
		limit := 1 + int(limit16%4096)
		want := wantEvents(data, limit)
		// Alone on a budget of its line limit, a Splitter behaves as one
		// without a budget, and leaves nothing counted.
		budget := NewBudget(limit)
		for _, share := range []*budgetShare{nil, {b: budget}} {
			readAll(t, data, limit, sizes, share, want)
		}
		if budget.Used() != 0 {
			t.Fatalf("the budget still counts %d bytes", budget.Used())
		}
	})
}

// readAll reads data through a Splitter (on share, when not nil) and
// checks its events against want.
func readAll(t *testing.T, data []byte, limit int, sizes []byte, share *budgetShare, want []Event) {
	var count atomic.Int64
	src := &plainSource{r: &chunkedReader{data: bytes.Clone(data), sizes: sizes}, max: limit + 1}
	lr := NewSplitter(src, limit, &count, nil)
	lr.share = share
	var got []Event
	for {
		evs := lr.Batch()
		if len(evs) == 0 || len(evs) > MaxBatchLines {
			t.Fatalf("a batch of %d events", len(evs))
		}
		if cap(lr.line) > limit || share != nil && cap(share.line) > limit {
			t.Fatalf("the Splitter holds more than the limit %d of an unfinished line", limit)
		}
		got = append(got, evs...)
		if k := evs[len(evs)-1].Kind; k == KindEOF || k == KindError {
			break
		}
	}
	if count.Load() != int64(len(data)) {
		t.Fatalf("counted %d bytes read, want %d", count.Load(), len(data))
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("event %d (budget %v): got kind %d %q, want kind %d %q", i, share != nil, got[i].Kind, got[i].Data, want[i].Kind, want[i].Data)
		}
	}
}
