//go:build !unix

package framing

import (
	"io"
	"syscall"
)

// rawConn: only unix devices are written without waiting.
func rawConn(io.Writer) syscall.RawConn { return nil }

// WriteNow is unix's only.
func WriteNow(syscall.RawConn, []byte) (int, error) { panic("framing: WriteNow is unix's only") }

// nowWriter is unix's only.
type nowWriter struct{ raw syscall.RawConn }

func (*nowWriter) try([]byte) (int, error) { panic("framing: WriteNow is unix's only") }
