package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Diff describes what the record holds for approval, one tool after
// another in name order: a new tool's definition, or what changed in a
// changed one, field by field (docs/views.md, "Pinned definitions"):
// title and description word by word, [-removed-] and {+added+}; the
// schemas and annotations by a JSON-pointer path to each value that
// differs. "" when nothing awaits approval.
func (r *PinRecord) Diff() string {
	var b strings.Builder
	if r.Quarantined && r.Approved.IsZero() {
		fmt.Fprintf(&b, "%s is quarantined: nothing of it is listed until snodod approve %s\n", r.Server, r.Server)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Pending)) {
		next := decodeDefinition(r.Pending[name].Definition)
		old, known := r.Tools[name]
		if !known {
			fmt.Fprintf(&b, "tool %s: new\n", name)
			for _, f := range pinnedFields[1:] {
				if v, ok := next[f]; ok {
					fmt.Fprintf(&b, "  %s: %s\n", f, oneLineJSON(v))
				}
			}
			continue
		}
		fmt.Fprintf(&b, "tool %s: changed\n", name)
		prev := decodeDefinition(old.Definition)
		for _, f := range pinnedFields[1:] {
			a, inA := prev[f]
			c, inC := next[f]
			sa, aText := a.(string)
			sc, cText := c.(string)
			switch {
			case inA && inC && aText && cText:
				if sa != sc {
					fmt.Fprintf(&b, "  %s: %s\n", f, WordDiff(sa, sc))
				}
			default:
				for _, line := range valueDiff("/"+f, a, inA, c, inC) {
					fmt.Fprintf(&b, "  %s\n", line)
				}
			}
		}
	}
	return b.String()
}

func decodeDefinition(def json.RawMessage) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(def))
	dec.UseNumber()
	var m map[string]any
	_ = dec.Decode(&m) // canonicalTool wrote it
	return m
}

func oneLineJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// valueDiff lists the differences of two JSON values under path: one
// line per value added (+), removed (-) or changed (a string word by
// word, anything else old → new), objects and arrays walked member by
// member.
func valueDiff(path string, a any, inA bool, c any, inC bool) []string {
	switch {
	case !inA && !inC:
		return nil
	case !inA:
		return []string{"+ " + path + ": " + oneLineJSON(c)}
	case !inC:
		return []string{"- " + path + ": " + oneLineJSON(a)}
	}
	if ma, ok := a.(map[string]any); ok {
		if mc, ok := c.(map[string]any); ok {
			var out []string
			keys := slices.Sorted(maps.Keys(ma))
			for k := range mc {
				if _, ok := ma[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				va, okA := ma[k]
				vc, okC := mc[k]
				out = append(out, valueDiff(path+"/"+pointerToken(k), va, okA, vc, okC)...)
			}
			return out
		}
	}
	if la, ok := a.([]any); ok {
		if lc, ok := c.([]any); ok {
			var out []string
			for i := range max(len(la), len(lc)) {
				var va, vc any
				if i < len(la) {
					va = la[i]
				}
				if i < len(lc) {
					vc = lc[i]
				}
				out = append(out, valueDiff(path+"/"+strconv.Itoa(i), va, i < len(la), vc, i < len(lc))...)
			}
			return out
		}
	}
	ja, jc := oneLineJSON(a), oneLineJSON(c)
	if ja == jc {
		return nil
	}
	if sa, ok := a.(string); ok {
		if sc, ok := c.(string); ok {
			return []string{"~ " + path + ": " + WordDiff(sa, sc)}
		}
	}
	return []string{"~ " + path + ": " + ja + " → " + jc}
}

// pointerToken escapes a JSON pointer's reference token (RFC 6901).
func pointerToken(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// maxDiffCells bounds the table of WordDiff's longest common subsequence
// (words before × words after, once the common ends are cut): beyond it
// the middle is shown removed whole and added whole.
const maxDiffCells = 1 << 22

// WordDiff shows how b differs from a, word by word (words are what
// whitespace separates; the result joins them with one space): the words
// only in a as [-words-], those only in b as {+words+}, along a longest
// common subsequence of the two.
func WordDiff(a, b string) string {
	x, y := strings.Fields(a), strings.Fields(b)
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	var ops []wordOp
	for _, w := range x[:pre] {
		ops = append(ops, wordOp{' ', w})
	}
	ops = append(ops, lcsOps(mx, my)...)
	for _, w := range x[len(x)-suf:] {
		ops = append(ops, wordOp{' ', w})
	}
	var out []string
	for i := 0; i < len(ops); {
		j := i
		for j < len(ops) && ops[j].kind == ops[i].kind {
			j++
		}
		words := make([]string, 0, j-i)
		for _, o := range ops[i:j] {
			words = append(words, o.word)
		}
		text := strings.Join(words, " ")
		switch ops[i].kind {
		case '-':
			out = append(out, "[-"+text+"-]")
		case '+':
			out = append(out, "{+"+text+"+}")
		default:
			out = append(out, text)
		}
		i = j
	}
	return strings.Join(out, " ")
}

type wordOp struct {
	kind byte // ' ' kept, '-' removed, '+' added
	word string
}

// lcsOps is the edit of x into y along a longest common subsequence,
// removals before additions where both stand between the same kept words.
func lcsOps(x, y []string) []wordOp {
	var ops []wordOp
	if len(x)*len(y) > maxDiffCells || len(x) == 0 || len(y) == 0 {
		for _, w := range x {
			ops = append(ops, wordOp{'-', w})
		}
		for _, w := range y {
			ops = append(ops, wordOp{'+', w})
		}
		return ops
	}
	// l[i][j] is the length of the LCS of x[i:] and y[j:].
	w := len(y) + 1
	l := make([]int32, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				l[i*w+j] = l[(i+1)*w+j+1] + 1
			} else {
				l[i*w+j] = max(l[(i+1)*w+j], l[i*w+j+1])
			}
		}
	}
	var removed, added []wordOp
	flush := func() {
		ops = append(ops, removed...)
		ops = append(ops, added...)
		removed, added = removed[:0], added[:0]
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			flush()
			ops = append(ops, wordOp{' ', x[i]})
			i, j = i+1, j+1
		case l[(i+1)*w+j] >= l[i*w+j+1]:
			removed = append(removed, wordOp{'-', x[i]})
			i++
		default:
			added = append(added, wordOp{'+', y[j]})
			j++
		}
	}
	for ; i < len(x); i++ {
		removed = append(removed, wordOp{'-', x[i]})
	}
	for ; j < len(y); j++ {
		added = append(added, wordOp{'+', y[j]})
	}
	flush()
	return ops
}
