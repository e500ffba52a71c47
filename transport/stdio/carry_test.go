package stdio

import (
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/framing"
)

// detachPipe is a real pipe: the Reader's input, and the client's end.
func detachPipe(t *testing.T) (in, client *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// takeBatch takes the next batch the Reader delivers, as a coordinator
// would.
func takeBatch(t *testing.T, r *Reader) []framing.Event {
	t.Helper()
	select {
	case evs := <-r.batches:
		return evs
	case <-time.After(10 * time.Second):
		t.Fatal("no batch")
		return nil
	}
}

func eventText(evs []framing.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case framing.KindLine:
			out = append(out, string(ev.Data))
		case framing.KindOversize:
			out = append(out, "<oversize>")
		case framing.KindEOF:
			out = append(out, "<eof>")
		default:
			out = append(out, "<other>")
		}
	}
	return out
}

// Whatever a Reader read and no instance handled crosses Detach, a JSON
// round trip and NewReaderFrom, in order: lines delivered but not handled,
// a refused line, the start of a line, and then the device's next bytes,
// read by the new Reader. The old Reader's goroutine ends; nothing is read
// twice.
func TestDetachCarriesUnhandledInput(t *testing.T) {
	tests := []struct {
		name    string
		first   string   // written before the detach
		handled int      // lines of the first batch the "coordinator" handled
		wait    []string // the lines to see delivered before the detach
		carried []string // the carried lines
		partial string
		then    string   // written after the detach
		want    []string // what the new Reader delivers
	}{
		{name: "lines delivered, one handled", first: "a\nb\nc\n", handled: 1, wait: []string{"a", "b", "c"},
			carried: []string{"b", "c"}, then: "d\n", want: []string{"b", "c", "d"}},
		{name: "the start of a line", first: "a\npar", handled: 1, wait: []string{"a"},
			partial: "par", then: "tial\n", want: []string{"partial"}},
		{name: "a refused line", first: strings.Repeat("x", 20) + "\nok\n", handled: 0, wait: []string{"<oversize>", "ok"},
			carried: []string{"<oversize>", "ok"}, then: "z\n", want: []string{"<oversize>", "ok", "z"}},
		{name: "nothing read", first: "", then: "q\n", want: []string{"q"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, client := detachPipe(t)
			r := NewReader(in, 10)
			if tt.first != "" {
				if _, err := client.WriteString(tt.first); err != nil {
					t.Fatal(err)
				}
			}
			if tt.wait != nil {
				var got []framing.Event
				for len(got) < len(tt.wait) {
					got = append(got, takeBatch(t, r)...)
				}
				if !reflect.DeepEqual(eventText(got), tt.wait) {
					t.Fatalf("delivered %q, want %q", eventText(got), tt.wait)
				}
				r.pending = got[tt.handled:]
			}
			if tt.partial != "" {
				// The partial line is read once the Reader waits again.
				eventually.Within(eventually.Timeout, func() bool { return r.BytesIn() >= int64(len(tt.first)) })
			}
			c, err := r.Detach()
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range c.Lines {
				if l.Oversize {
					lines = append(lines, "<oversize>")
				} else {
					lines = append(lines, string(l.Data))
				}
			}
			if !reflect.DeepEqual(lines, tt.carried) || string(c.Partial)+string(c.Rest) != tt.partial || c.EOF {
				t.Fatalf("carry %+v; want lines %q, partial %q", c, tt.carried, tt.partial)
			}
			if c.BytesIn != int64(len(tt.first)) {
				t.Fatalf("BytesIn %d, want %d", c.BytesIn, len(tt.first))
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back Carry
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			r.Close() // a no-op after Detach
			nr := NewReaderFrom(in, 10, back)
			defer nr.Close()
			if _, err := client.WriteString(tt.then); err != nil {
				t.Fatal(err)
			}
			got := eventText(nr.pending)
			for len(got) < len(tt.want) {
				got = append(got, eventText(takeBatch(t, nr))...)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("the new reader delivered %q, want %q", got, tt.want)
			}
			if want := int64(len(tt.first) + len(tt.then)); nr.BytesIn() != want {
				t.Fatalf("BytesIn %d, want %d", nr.BytesIn(), want)
			}
		})
	}
}

// A Reader whose input has ended carries the end: the new Reader delivers
// the carried bytes, then EOF, without reading the device.
func TestDetachCarriesEOF(t *testing.T) {
	in, client := detachPipe(t)
	r := NewReader(in, 100)
	client.WriteString("a\nlast")
	client.Close()
	evs := takeBatch(t, r)
	for evs[len(evs)-1].Kind != framing.KindEOF {
		evs = append(evs, takeBatch(t, r)...)
	}
	if got := eventText(evs); !reflect.DeepEqual(got, []string{"a", "last", "<eof>"}) {
		t.Fatalf("delivered %q", got)
	}
	r.pending = evs[1:]
	c, err := r.Detach()
	if err != nil {
		t.Fatal(err)
	}
	if !c.EOF || len(c.Lines) != 1 || string(c.Lines[0].Data) != "last" {
		t.Fatalf("carry %+v", c)
	}
	nr := NewReaderFrom(in, 100, c)
	defer nr.Close()
	got := eventText(nr.pending)
	got = append(got, eventText(takeBatch(t, nr))...)
	if !reflect.DeepEqual(got, []string{"last", "<eof>"}) {
		t.Fatalf("the new reader delivered %q", got)
	}
}

// A Reader on input without deadlines cannot be detached, nor can one
// that was closed or detached.
func TestDetachRefused(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	r := NewReader(pr, 10)
	if _, err := r.Detach(); err != ErrDetach {
		t.Fatalf("Detach on an io.Pipe: %v", err)
	}
	pw.Close()
	r.Close()
	in, _ := detachPipe(t)
	r = NewReader(in, 10)
	if _, err := r.Detach(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Detach(); err != ErrDetach {
		t.Fatalf("a second Detach: %v", err)
	}
	r = NewReader(in, 10)
	r.Close()
	if _, err := r.Detach(); err != ErrDetach {
		t.Fatalf("Detach after Close: %v", err)
	}
}
