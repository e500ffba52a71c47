package stdio

import (
	"testing"

	"github.com/snodod/snodod/internal/framing"
)

// The output side of the Budget as a connection sees it (docs/transport.md
// §3.5, §11.5); the accounting itself is pinned in internal/framing
// (TestBudgetOutputBoundary and the others).

// TestBudgetOutputTakesLines: output that does not fit takes the longest
// unfinished lines first; their connections are told when they next send.
func TestBudgetOutputTakesLines(t *testing.T) {
	b := NewBudget(1000)
	long, short := newBudgetPeer(t, b, 5000), newBudgetPeer(t, b, 5000)
	long.write(x(500))
	awaitUsed(t, b, 500)
	short.write(x(300))
	awaitUsed(t, b, 800)
	if !b.tryOutput(200) {
		t.Fatal("200 bytes did not fit beside 800 of lines in 1,000")
	}
	if b.Used() != 1000 {
		t.Fatalf("used %d, want 1000: a line was taken while output still fit", b.Used())
	}
	if !b.tryOutput(1) {
		t.Fatal("output did not take a line to fit")
	}
	if b.Used() != 300+201 {
		t.Fatalf("used %d, want 501: output took another line than the longest, or more than one", b.Used())
	}
	long.write("\n")
	if ev := long.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("the taken line's connection got %+v, want the budget refusal", ev)
	}
	short.write("\n")
	if ev := short.next(); ev.Kind != framing.KindLine || len(ev.Data) != 300 {
		t.Fatalf("the other line: %+v", ev)
	}
}

// TestBudgetOutputLargerThanBudgetTakesLines: an answer larger than the
// whole budget takes every line, and each connection is told.
func TestBudgetOutputLargerThanBudgetTakesLines(t *testing.T) {
	b := NewBudget(1000)
	line := newBudgetPeer(t, b, 5000)
	line.write(x(400))
	awaitUsed(t, b, 400)
	if !b.tryOutput(5000) {
		t.Fatal("an answer larger than the budget was refused while no other output is held")
	}
	if b.Used() != 5000 {
		t.Fatalf("used %d, want 5000: the line was not taken", b.Used())
	}
	line.write("\n")
	if ev := line.next(); ev.Kind != framing.KindOverBudget {
		t.Fatalf("the taken line's connection got %+v, want the budget refusal", ev)
	}
	b.releaseOutput(5000)
	if b.Used() != 0 || b.Output() != 0 {
		t.Fatalf("used %d, output %d after every release", b.Used(), b.Output())
	}
}
