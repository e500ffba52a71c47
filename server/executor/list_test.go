package executor

import (
	"slices"
	"testing"
)

type listItem struct {
	name string
	on   link[listItem]
}

// items walks l both ways and fails when the two walks disagree, so a
// broken back link cannot hide behind a good forward one.
func items(t *testing.T, l *linkedList[listItem]) []string {
	t.Helper()
	var fwd, back []string
	for n := l.head; n != nil; n = n.next {
		fwd = append(fwd, n.elem.name)
	}
	for n := l.tail; n != nil; n = n.prev {
		back = append(back, n.elem.name)
	}
	slices.Reverse(back)
	if !slices.Equal(fwd, back) {
		t.Fatalf("forward %q, backward %q", fwd, back)
	}
	return fwd
}

func TestLinkedList(t *testing.T) {
	tests := []struct {
		name string
		// ops: "+x" pushes x back, "-x" removes x, "^x" inserts x first,
		// "x>y" inserts y after x.
		ops  []string
		want []string
	}{
		{"empty", nil, nil},
		{"push in order", []string{"+a", "+b", "+c"}, []string{"a", "b", "c"}},
		{"remove the head", []string{"+a", "+b", "+c", "-a"}, []string{"b", "c"}},
		{"remove the tail", []string{"+a", "+b", "+c", "-c"}, []string{"a", "b"}},
		{"remove the middle", []string{"+a", "+b", "+c", "-b"}, []string{"a", "c"}},
		{"remove the only one", []string{"+a", "-a"}, nil},
		{"again after removal", []string{"+a", "+b", "-a", "+a"}, []string{"b", "a"}},
		{"insert first", []string{"+a", "^b"}, []string{"b", "a"}},
		{"insert first when empty", []string{"^a", "+b"}, []string{"a", "b"}},
		{"insert in the middle", []string{"+a", "+c", "a>b"}, []string{"a", "b", "c"}},
		{"insert after the tail", []string{"+a", "a>b", "+c"}, []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := map[string]*listItem{}
			item := func(name string) *listItem {
				if all[name] == nil {
					all[name] = &listItem{name: name}
				}
				return all[name]
			}
			var l linkedList[listItem]
			for _, op := range tt.ops {
				switch {
				case op[0] == '+':
					x := item(op[1:])
					l.pushBack(&x.on, x)
				case op[0] == '-':
					l.remove(&item(op[1:]).on)
				case op[0] == '^':
					x := item(op[1:])
					l.insertAfter(nil, &x.on, x)
				default:
					at, x := item(op[:1]), item(op[2:])
					l.insertAfter(&at.on, &x.on, x)
				}
			}
			got := items(t, &l)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("list %q, want %q", got, tt.want)
			}
			if len(got) > 0 && l.front().name != got[0] || len(got) == 0 && l.front() != nil {
				t.Errorf("front %v, want the first of %q", l.front(), got)
			}
			for name, x := range all {
				if on := slices.Contains(got, name); l.contains(&x.on) != on {
					t.Errorf("contains(%s) = %v, want %v", name, !on, on)
				}
			}
		})
	}
}
