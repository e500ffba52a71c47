package mcpclient

import (
	"bytes"
	"io"
	"os"
	"strconv"
)

// watchBytes is how much of the start and of the end of a long line
// lineWatch keeps to find the line's id.
const watchBytes = 256

// lineWatch sits between the child's stdout and the framing.Scanner, which
// drops a line over the limit without keeping it. It remembers the first
// and last bytes of each line that spans reads, and when a line turns out
// to be over the limit it reports them (on the Scanner's goroutine, once the
// line has ended), so that a too-long response fails its call
// (docs/upstreams.md §4, stdout hygiene) instead of leaving it waiting. Lines
// that end within one read cost one IndexByte.
type lineWatch struct {
	f      *os.File
	limit  int                     // the Scanner's: the newline counts
	onLong func(head, tail []byte) // a line over the limit has ended

	n    int    // bytes of the current line so far
	head []byte // its first watchBytes
	tail []byte // its last watchBytes (at most 2*watchBytes held)
}

func (w *lineWatch) Read(p []byte) (int, error) {
	n, err := w.f.Read(p)
	w.scan(p[:n])
	if err == io.EOF && w.n > w.limit { // no newline at the end: it counts no byte
		w.onLong(w.head, w.tail)
		w.reset()
	}
	return n, err
}

func (w *lineWatch) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if w.n == 0 && i >= 0 && i < w.limit {
			b = b[i+1:] // a whole line within the limit: nothing to keep
			continue
		}
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if len(w.head) < watchBytes {
			w.head = append(w.head, seg[:min(len(seg), watchBytes-len(w.head))]...)
		}
		if len(seg) >= watchBytes {
			w.tail = append(w.tail[:0], seg[len(seg)-watchBytes:]...)
		} else {
			if len(w.tail)+len(seg) > 2*watchBytes {
				w.tail = append(w.tail[:0], w.tail[len(w.tail)-watchBytes:]...)
			}
			w.tail = append(w.tail, seg...)
		}
		w.n += len(seg)
		if i < 0 {
			return
		}
		if w.n >= w.limit { // with its newline it is over
			w.onLong(w.head, w.tail)
		}
		w.reset()
		b = b[i+1:]
	}
}

func (w *lineWatch) reset() {
	w.n, w.head, w.tail = 0, w.head[:0], w.tail[:0]
}

// longLineID reads the top-level integer id of a JSON-RPC response from the start
// and the end of a line too long to keep. SDKs put the id either before
// the result (`{"jsonrpc":"2.0","id":7,"result":…}`) or after it
// (`{"result":…,"jsonrpc":"2.0","id":7}`), so both ends are looked at. ok
// is false when the line is not a response (it names a method) or its id
// cannot be told.
func longLineID(head, tail []byte) (id int64, ok bool) {
	keys, headID := headMembers(head)
	if keys["method"] || !(keys["result"] || keys["error"]) {
		return 0, false
	}
	if headID != nil {
		return parseIntID(headID)
	}
	if raw := lastMemberID(tail); raw != nil {
		return parseIntID(raw)
	}
	return 0, false
}

// headMembers reads the top-level members at the start of a line as far as
// head goes: the names it met and the id's raw value if it was whole.
func headMembers(b []byte) (keys map[string]bool, id []byte) {
	keys = make(map[string]bool, 4)
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return keys, nil
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return keys, id
		}
		end := quoteEnd(b, i)
		if end < 0 {
			return keys, id
		}
		name := string(b[i+1 : end-1])
		keys[name] = true
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return keys, id
		}
		i = skipWS(b, i+1)
		vend := scalarEnd(b, i)
		if vend < 0 {
			return keys, id // an object, an array or a cut value: the rest is past head
		}
		if name == "id" {
			id = b[i:vend]
		}
		i = skipWS(b, vend)
		if i >= len(b) || b[i] != ',' {
			return keys, id
		}
		i++
	}
}

// lastMemberID returns the value of the top-level object's last member
// when that member is "id" with a scalar value: the line ends with
// `"id":VALUE}` preceded by ',' or '{'. A nested "id" always has a '}' or
// ']' of its own before the final '}', so it is never taken.
func lastMemberID(b []byte) []byte {
	j := skipWSBack(b, len(b))
	if j == 0 || b[j-1] != '}' {
		return nil
	}
	vend := skipWSBack(b, j-1)
	vstart := scalarStartBack(b, vend)
	if vstart < 0 {
		return nil
	}
	k := skipWSBack(b, vstart)
	if k == 0 || b[k-1] != ':' {
		return nil
	}
	k = skipWSBack(b, k-1)
	if k < 4 || string(b[k-4:k]) != `"id"` || isEscaped(b, k-4) {
		return nil
	}
	k = skipWSBack(b, k-4)
	if k == 0 || (b[k-1] != ',' && b[k-1] != '{') {
		return nil
	}
	return b[vstart:vend]
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

func skipWSBack(b []byte, j int) int {
	for j > 0 && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\r') {
		j--
	}
	return j
}

// quoteEnd returns the index past the string starting at b[i], or -1.
func quoteEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// scalarEnd returns the index past a string or a number starting at b[i],
// or -1 for anything else or a value cut by the end of b.
func scalarEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	if b[i] == '"' {
		return quoteEnd(b, i)
	}
	j := i
	for j < len(b) && isNumberByte(b[j]) {
		j++
	}
	if j == i || j == len(b) {
		return -1
	}
	return j
}

// scalarStartBack returns the start of a string or number ending at b[j],
// or -1.
func scalarStartBack(b []byte, j int) int {
	if j == 0 {
		return -1
	}
	if b[j-1] == '"' {
		if isEscaped(b, j-1) {
			return -1
		}
		for k := j - 2; k >= 0; k-- {
			if b[k] == '"' && !isEscaped(b, k) {
				return k
			}
		}
		return -1
	}
	k := j
	for k > 0 && isNumberByte(b[k-1]) {
		k--
	}
	if k == j || k == 0 {
		return -1
	}
	return k
}

// isEscaped reports whether b[i] is preceded by an odd run of backslashes.
func isEscaped(b []byte, i int) bool {
	n := 0
	for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
		n++
	}
	return n%2 == 1
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// parseIntID reads an id the Conn minted: a JSON integer.
func parseIntID(raw []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}
