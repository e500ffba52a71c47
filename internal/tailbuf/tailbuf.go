// Package tailbuf keeps the last bytes a program wrote, for the error
// that quotes them (an exec tool's stderr, a hosted server's).
package tailbuf

import (
	"sync"
	"unicode/utf8"
)

// Buffer keeps the last Max bytes written to it. Its methods may be called
// concurrently. The zero value keeps nothing; set Max before use.
type Buffer struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write keeps the end of p: it never fails, and holds at most 2×keep
// bytes between trims. What it keeps beyond Max lets Tail see where a
// rune at the cut began.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := b.Max + utf8.UTFMax
	if len(p) >= keep {
		b.buf = append(b.buf[:0], p[len(p)-keep:]...)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*keep {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-keep:]...)
	}
	return len(p), nil
}

// Tail returns a copy of the last Max bytes, starting at a rune boundary
// when the cut fell inside one.
func (b *Buffer) Tail() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), Cut(b.buf, b.Max)...)
}

// Cut returns the last n bytes of p, without the continuation bytes of a
// rune the cut fell inside (at most utf8.UTFMax of them: more are not
// UTF-8 and stay, for the caller to show as it shows invalid text).
func Cut(p []byte, n int) []byte {
	if len(p) <= n {
		return p
	}
	p = p[len(p)-n:]
	for i := 0; i < utf8.UTFMax && len(p) > 0 && !utf8.RuneStart(p[0]); i++ {
		p = p[1:]
	}
	return p
}
