package daemon

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// check verifies the table's invariants: every entry is filed under its
// own id and not reaped, the per-uid counts are the entries' (an entry
// deleted outside reap leaves its count behind), no id is beyond the last
// one given.
func (t *table) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	perUID := map[int]int{}
	for id, e := range t.entries {
		switch {
		case e.id != id:
			return fmt.Errorf("entry %d filed under id %d", e.id, id)
		case e.reaped:
			return fmt.Errorf("entry %d is reaped but still in the table", id)
		case id > t.nextID:
			return fmt.Errorf("entry %d is beyond the last id given, %d", id, t.nextID)
		}
		perUID[e.uid]++
	}
	if len(perUID) != len(t.perUID) {
		return fmt.Errorf("per-uid counts %v, the entries make %v", t.perUID, perUID)
	}
	for uid, n := range perUID {
		if t.perUID[uid] != n {
			return fmt.Errorf("per-uid counts %v, the entries make %v", t.perUID, perUID)
		}
	}
	return nil
}

// checkEmpty verifies that the table is consistent and empty: what a
// daemon's table must be once Run has returned.
func (t *table) checkEmpty() error {
	if err := t.check(); err != nil {
		return err
	}
	if n := t.len(); n != 0 {
		return fmt.Errorf("%d entries left", n)
	}
	return nil
}

// reserve refuses at the exact boundary of each cap, counting reserved
// entries as started ones, and a reap frees the place it held.
func TestTableReserveAtTheCap(t *testing.T) {
	const maxAll, maxPerUID = 3, 2
	tb := newTable(nil)
	held := map[string]*entry{}
	for _, step := range []struct {
		name string
		uid  int
		reap string // reap held[reap] instead of reserving
		want refusal
	}{
		{name: "a1", uid: 1},
		{name: "a2", uid: 1},
		{name: "a3", uid: 1, want: refusedUIDCapacity},
		{name: "b1", uid: 2},
		{name: "c1", uid: 3, want: refusedCapacity},
		{name: "b2", uid: 2, want: refusedCapacity},
		{reap: "a1"},
		{name: "a3 again", uid: 1},
		{name: "c1 again", uid: 3, want: refusedCapacity},
		{reap: "b1"},
		{name: "c1 at last", uid: 3},
	} {
		if step.reap != "" {
			tb.reap(held[step.reap])
		} else {
			e, why := tb.reserve(step.uid, place{via: "socket"}, maxAll, maxPerUID)
			if why != step.want || (e == nil) != (why != "") {
				t.Fatalf("%s: reserve = %v, %q; want refusal %q", step.name, e, why, step.want)
			}
			if e != nil {
				held[step.name] = e
			}
		}
		if err := tb.check(); err != nil {
			t.Fatalf("after %s%s: %v", step.name, step.reap, err)
		}
	}
	if n := tb.len(); n != maxAll {
		t.Errorf("%d entries, want %d", n, maxAll)
	}
	tb.close()
	if e, why := tb.reserve(9, place{}, 100, 100); e != nil || why != refusedDraining {
		t.Errorf("reserve after close = %v, %q; want %q", e, why, refusedDraining)
	}
}

// Concurrent admissions cannot overshoot the cap: each reservation is
// counted as it is made.
func TestTableReserveConcurrently(t *testing.T) {
	const maxAll, clients = 16, 64
	tb := newTable(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for i := range clients {
		wg.Go(func() {
			if e, _ := tb.reserve(i, place{}, maxAll, 1); e != nil {
				mu.Lock()
				got++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got != maxAll || tb.len() != maxAll {
		t.Errorf("%d reserved, %d entries; want %d", got, tb.len(), maxAll)
	}
	if err := tb.check(); err != nil {
		t.Error(err)
	}
}

// Reaping an entry twice (a session's end after a failure path reaped it,
// say) changes nothing the second time: no place is freed twice, and the
// count of entries to wait for does not go below zero (which panics).
func TestTableReapIdempotent(t *testing.T) {
	tb := newTable(nil)
	a, _ := tb.reserve(7, place{}, 2, 2)
	b, _ := tb.reserve(7, place{}, 2, 2)
	tb.start(b, nil)
	for range 2 {
		tb.reap(a)
		if err := tb.check(); err != nil {
			t.Fatal(err)
		}
		if n := tb.len(); n != 1 {
			t.Fatalf("%d entries after reaping one of two, want 1", n)
		}
	}
	// The place a freed is free once: one reservation fits, not two.
	if c, why := tb.reserve(7, place{}, 2, 2); c == nil {
		t.Fatalf("reserve after the reap: %q", why)
	}
	if _, why := tb.reserve(7, place{}, 2, 2); why != refusedCapacity {
		t.Fatalf("a second reserve after one reap: %q, want %q", why, refusedCapacity)
	}
	tb.close()
	for _, e := range []*entry{b, b, tb.entries[3], a} {
		tb.reap(e)
	}
	tb.wait() // returns: every entry reaped once
	if err := tb.checkEmpty(); err != nil {
		t.Error(err)
	}
}

// A resumed session keeps its id, is not bound by the caps (it was
// admitted before), and pushes the ids given after it; an id taken, or a
// closed table, refuses it.
func TestTableResume(t *testing.T) {
	tb := newTable(nil)
	e := tb.resume(41, 5, place{via: "connect", view: "v", cwd: "/w"})
	if e == nil || e.id != 41 || e.at.view != "v" {
		t.Fatalf("resume = %+v", e)
	}
	if again := tb.resume(41, 5, place{}); again != nil {
		t.Errorf("a second resume of id 41 = %+v, want nil", again)
	}
	if f := tb.resume(3, 5, place{}); f == nil {
		t.Error("resume of id 3 after 41 refused")
	}
	if id := tb.newID(); id != 42 {
		t.Errorf("the next id after resuming 41: %d, want 42", id)
	}
	if n, _ := tb.reserve(5, place{}, 3, 3); n == nil || n.id != 43 {
		t.Errorf("reserve after resumes = %+v", n)
	}
	if err := tb.check(); err != nil {
		t.Error(err)
	}
	tb.close()
	if late := tb.resume(50, 5, place{}); late != nil {
		t.Errorf("resume into a closed table = %+v, want nil", late)
	}
}

// The first-request timer fires once unless the entry is reaped or the
// timer disarmed first; time is the bubble's, not slept.
func TestTableFirstRequestTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTable(nil)
		fired := map[string]bool{}
		arm := func(name string) *entry {
			e, _ := tb.reserve(1, place{}, 10, 10)
			tb.arm(e, time.Second, func() {
				if tb.disarm(e) {
					fired[name] = true
				}
			})
			return e
		}
		arm("kept")
		reaped := arm("reaped")
		disarmed := arm("disarmed")
		tb.reap(reaped)
		if !tb.disarm(disarmed) {
			t.Error("disarm of an armed timer reported false")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !fired["kept"] || fired["reaped"] || fired["disarmed"] {
			t.Errorf("fired: %v, want kept only", fired)
		}
		if tb.disarm(reaped) {
			t.Error("disarm of a reaped entry reported true")
		}
		late, _ := tb.reserve(1, place{}, 10, 10)
		tb.reap(late)
		tb.arm(late, time.Second, func() { t.Error("a reaped entry's timer fired") })
		time.Sleep(2 * time.Second)
		synctest.Wait()
	})
}

// The table is the daemon's one map by session id, and reap the only code
// that takes an entry out of it: checked on the source, so that a new
// path that forgets or deletes an entry fails here rather than in
// production.
func TestOnlyReapDeletesEntries(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var mapFields []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, _ := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Field:
					if m, ok := n.Type.(*ast.MapType); ok && isIdent(m.Key, "uint64") {
						mapFields = append(mapFields, fset.Position(n.Pos()).String())
					}
				case *ast.ValueSpec:
					if m, ok := n.Type.(*ast.MapType); ok && isIdent(m.Key, "uint64") {
						mapFields = append(mapFields, fset.Position(n.Pos()).String())
					}
				case *ast.CallExpr:
					if (isIdent(n.Fun, "delete") || isIdent(n.Fun, "clear")) && len(n.Args) > 0 && isSelector(n.Args[0], "entries") &&
						(fn == nil || fn.Name.Name != "reap" || fn.Recv == nil) {
						t.Errorf("%s: %s of the table's entries outside table.reap", fset.Position(n.Pos()), n.Fun.(*ast.Ident).Name)
					}
				case *ast.AssignStmt:
					for _, lhs := range n.Lhs {
						if isSelector(lhs, "entries") {
							t.Errorf("%s: the table's entries replaced", fset.Position(n.Pos()))
						}
					}
				}
				return true
			})
		}
	}
	if len(mapFields) != 1 || !strings.HasPrefix(mapFields[0], "table.go:") {
		t.Errorf("maps by session id: %v; want the table's entries alone", mapFields)
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// isSelector reports whether e is x.name (t.entries[id] is not: setting
// an element is not replacing the map).
func isSelector(e ast.Expr, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}
