//go:build unix

package stdio_test

import (
	"strings"
	"testing"

	"github.com/snodod/snodod/transport/stdio"
)

// A connection on a pollable device holds a read buffer only while it
// reads: waiting for the next line, it has given it back. A small buffer
// serves a short line; a line that fills it is read on with a large one.
func TestIdleConnectionHoldsNoReadBuffer(t *testing.T) {
	for _, tc := range []struct {
		name         string
		text         int
		small, large int // free once the connection waits again
	}{
		{"short line", 10, 1, 0},
		{"long line", 20_000, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, pipes)
			stdio.DrainReadBuffers()
			h.send(call(1, "echo", `{"text":"`+strings.Repeat("x", tc.text)+`"}`))
			h.line()
			waitFor(t, func() bool {
				small, large := stdio.FreeReadBuffers()
				return small == tc.small && large == tc.large
			})
			h.finish()
		})
	}
}
