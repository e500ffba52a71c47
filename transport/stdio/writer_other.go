//go:build !unix

package stdio

import (
	"io"
	"syscall"
)

// rawConn: only unix devices are written without waiting.
func rawConn(io.Writer) syscall.RawConn { return nil }

func (w *frameWriter) try([]byte) (int, error) { panic("stdio: try without a descriptor") }

// WriteNow is unix's only.
func WriteNow(syscall.RawConn, []byte) (int, error) { panic("stdio: WriteNow is unix's only") }
