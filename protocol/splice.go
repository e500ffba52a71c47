package protocol

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// Spliced frames: a large string that needs no escaping is left out of the
// frame's buffer and written from its own memory, so that a large text
// result is never copied into a frame (docs/transport.md §11.1 still holds:
// the bytes written are the ones AppendResult would give).

// SpliceMin is the length from which a string that needs no escaping is
// spliced rather than copied into the frame.
const SpliceMin = 32 << 10

// Splice is one string left out of a frame's buffer: its text goes at
// offset At of the buffer (between the quotes the buffer holds).
type Splice struct {
	At   int
	Text string
}

// Splices are a frame's spliced strings, in order. The zero value holds
// none; a frame with none is its buffer alone.
type Splices []Splice

// Len is the number of bytes the splices add to the frame.
func (sp Splices) Len() int {
	n := 0
	for _, s := range sp {
		n += len(s.Text)
	}
	return n
}

// Parts appends to parts the frame buf with sp spliced in, in the order
// they are written: pieces of buf, and the texts in between. The texts'
// parts alias their strings' memory, which must never be written to.
func (sp Splices) Parts(parts [][]byte, buf []byte) [][]byte {
	last := 0
	for _, s := range sp {
		if s.At > last {
			parts = append(parts, buf[last:s.At])
		}
		parts = append(parts, unsafe.Slice(unsafe.StringData(s.Text), len(s.Text)))
		last = s.At
	}
	if last < len(buf) {
		parts = append(parts, buf[last:])
	}
	return parts
}

// SplicingAppender is an Appender that may splice its large strings
// (AppendStringSpliced) instead of appending them; sp nil splices nothing,
// as AppendJSON does. On error it returns, as AppendJSON, and sp may then
// hold splices past the returned slice, which the caller drops.
type SplicingAppender interface {
	Appender
	AppendJSONSpliced(dst []byte, sp *Splices) ([]byte, error)
}

// AppendStringSpliced is AppendString, except that a string of at least
// SpliceMin bytes that needs no escaping is added to sp (when not nil)
// instead of dst: dst gets its quotes only.
func AppendStringSpliced(dst []byte, s string, sp *Splices) []byte {
	if sp == nil || len(s) < SpliceMin || plainPrefix(s) != len(s) {
		return AppendString(dst, s)
	}
	dst = append(dst, '"')
	*sp = append(*sp, Splice{At: len(dst), Text: s})
	return append(dst, '"')
}

// AppendValueSpliced is AppendValue, splicing into sp what value splices
// when it is a SplicingAppender. On error dst is returned with nothing
// appended, and sp as it was.
func AppendValueSpliced(dst []byte, value any, sp *Splices) (out []byte, err error) {
	a, ok := value.(SplicingAppender)
	if !ok || sp == nil {
		return AppendValue(dst, value)
	}
	start, spliced := len(dst), len(*sp)
	defer func() {
		if p := recover(); p != nil {
			*sp = (*sp)[:spliced]
			out, err = dst[:start], fmt.Errorf("protocol: encoding panicked: %v", p)
		}
	}()
	if out, err = a.AppendJSONSpliced(dst, sp); err != nil {
		*sp = (*sp)[:spliced]
		return dst[:start], err
	}
	return out, nil
}

// AppendResultSpliced is AppendResult with result's large strings spliced
// into sp (see AppendValueSpliced): the frame is the returned buffer with
// sp spliced in (Splices.Parts). On error sp is as it was.
func AppendResultSpliced(dst []byte, id ID, result any, sp *Splices) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = id.AppendJSON(dst)
	dst = append(dst, `,"result":`...)
	dst, err := AppendValueSpliced(dst, result, sp)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, "}\n"...), nil
}

// plainPrefix returns the length of the longest prefix of s that
// AppendString copies as it is: no control character, quote or backslash,
// valid UTF-8 without U+2028 and U+2029. ASCII is checked eight bytes at a
// time.
func plainPrefix(s string) int {
	i := 0
	for {
		for i+8 <= len(s) {
			w := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
			if m := specialBytes(w); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(s) {
			return len(s)
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return i
		}
		i += size
	}
}
