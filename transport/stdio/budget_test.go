package stdio

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/framing"
)

// budgetPeer is one connection drawing on a Budget: a pipe the test
// writes to, read by a Reader of the budget.
type budgetPeer struct {
	t *testing.T
	w *os.File
	r *Reader
}

func newBudgetPeer(t *testing.T, b *Budget, limit int) *budgetPeer {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &budgetPeer{t: t, w: pw, r: b.NewReader(pr, limit)}
	t.Cleanup(func() {
		p.r.Close()
		pr.Close()
		pw.Close()
	})
	return p
}

func (p *budgetPeer) write(s string) {
	p.t.Helper()
	if _, err := p.w.WriteString(s); err != nil {
		p.t.Fatal(err)
	}
}

// next returns the next event the Reader delivers.
func (p *budgetPeer) next() framing.Event {
	p.t.Helper()
	for len(p.r.pending) == 0 {
		select {
		case p.r.pending = <-p.r.batches:
		case <-time.After(10 * time.Second):
			p.t.Fatal("no line within 10 s")
		}
	}
	ev := p.r.pending[0]
	p.r.pending = p.r.pending[1:]
	return ev
}

// nothing checks that the Reader has delivered nothing yet.
func (p *budgetPeer) nothing() {
	p.t.Helper()
	select {
	case evs := <-p.r.batches:
		p.t.Fatalf("unexpected events %+v", evs)
	default:
	}
}

// awaitUsed waits until the budget accounts for exactly want bytes: the
// Readers have taken in what was written.
func awaitUsed(t *testing.T, b *Budget, want int64) {
	t.Helper()
	if !eventually.Within(eventually.Timeout, func() bool { return b.Used() == want }) {
		t.Fatalf("budget uses %d bytes, want %d", b.Used(), want)
	}
}

func x(n int) string { return string(bytes.Repeat([]byte("x"), n)) }

// TestLineBudgetTakesTheLongest pins the budget at its boundary: the
// unfinished lines may total exactly the budget; one byte more takes the
// longest line from its connection, which is refused that line when it
// next sends (its rest is dropped) and served after it, while the
// connection that grew keeps its line.
func TestLineBudgetTakesTheLongest(t *testing.T) {
	b := NewBudget(3000)
	a, g := newBudgetPeer(t, b, 2000), newBudgetPeer(t, b, 2000)
	a.write(x(2000))
	awaitUsed(t, b, 2000)
	g.write(x(1000))
	awaitUsed(t, b, 3000) // exactly the budget: nothing is taken
	a.nothing()
	g.write("y")
	awaitUsed(t, b, 1001) // a's 2000 bytes are gone
	a.write(x(10) + "\n")
	if ev := a.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("a's first event: %+v, want its line refused over the budget", ev)
	}
	a.write(`{"ok":1}` + "\n")
	if ev := a.next(); ev.Kind != framing.KindLine || string(ev.Data) != `{"ok":1}` {
		t.Fatalf("a's next line: %+v, want it served", ev)
	}
	g.write("z\n")
	if ev := g.next(); ev.Kind != framing.KindLine || string(ev.Data) != x(1000)+"yz" {
		t.Fatalf("the growing connection's line: kind %d, %d bytes, want its 1002 bytes", ev.Kind, len(ev.Data))
	}
	awaitUsed(t, b, 0)
}

// TestLineBudgetRefusesTheGrower: when the connection that grows holds the
// longest line (or ties for it), it is the one refused, at once, and the
// others keep theirs.
func TestLineBudgetRefusesTheGrower(t *testing.T) {
	b := NewBudget(3000)
	a, g := newBudgetPeer(t, b, 2000), newBudgetPeer(t, b, 2000)
	a.write(x(1500))
	awaitUsed(t, b, 1500)
	g.write(x(1500))
	awaitUsed(t, b, 3000)
	g.write("y")
	if ev := g.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("the grower's event: %+v, want its line refused", ev)
	}
	awaitUsed(t, b, 1500)
	g.write("rest of the refused line\nnext\n")
	if ev := g.next(); ev.Kind != framing.KindLine || string(ev.Data) != "next" {
		t.Fatalf("after the refusal: %+v, want the next line", ev)
	}
	a.write("\n")
	if ev := a.next(); ev.Kind != framing.KindLine || len(ev.Data) != 1500 {
		t.Fatalf("the other connection's line: kind %d, %d bytes", ev.Kind, len(ev.Data))
	}
	a.nothing()
}

// TestLineBudgetLineLongerThanBudget: a budget below the line limit is the
// effective limit: a line that alone passes it is refused.
func TestLineBudgetLineLongerThanBudget(t *testing.T) {
	b := NewBudget(100)
	p := newBudgetPeer(t, b, 1000)
	p.write(x(100))
	awaitUsed(t, b, 100)
	p.write("x")
	if ev := p.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("event %+v, want the line refused", ev)
	}
	p.write("\n" + x(99) + "\n")
	if ev := p.next(); ev.Kind != framing.KindLine || len(ev.Data) != 99 {
		t.Fatalf("event kind %d, %d bytes, want the 99-byte line", ev.Kind, len(ev.Data))
	}
}

// TestLineBudgetReleases: a Reader's unfinished line stops counting when
// the Reader is closed, and a line taken from a connection whose input
// then ends is still reported, before the end.
func TestLineBudgetReleases(t *testing.T) {
	b := NewBudget(1000)
	a, c := newBudgetPeer(t, b, 1000), newBudgetPeer(t, b, 1000)
	a.write(x(600))
	c.write(x(300))
	awaitUsed(t, b, 900)
	c.r.Close()
	awaitUsed(t, b, 600)
	g := newBudgetPeer(t, b, 1000)
	g.write(x(401))
	awaitUsed(t, b, 401)
	a.w.Close()
	if ev := a.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("event %+v, want the taken line reported", ev)
	}
	if ev := a.next(); ev.Kind != framing.KindEOF {
		t.Fatalf("event %+v, want the end of input", ev)
	}
}

// TestLineBudgetSetMax: a reload's smaller budget applies at the next
// growth; zero means the default.
func TestLineBudgetSetMax(t *testing.T) {
	b := NewBudget(0)
	if b.Max() != 64_000_000 {
		t.Fatalf("default budget %d", b.Max())
	}
	b.SetMax(1000)
	a, g := newBudgetPeer(t, b, 2000), newBudgetPeer(t, b, 2000)
	a.write(x(900))
	awaitUsed(t, b, 900)
	b.SetMax(500)
	g.write(x(10))
	awaitUsed(t, b, 10)
	a.write("\n")
	if ev := a.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("event %+v, want the line taken", ev)
	}
}
