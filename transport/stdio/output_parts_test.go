package stdio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/snodod/snodod/internal/framing"
)

// A spliced final frame (output.finishParts) is written from its texts'
// own memory: what the device does not take at once stays in the output
// as the text itself, never a copy, and is counted in what the connection
// holds until it is written.

// smallUnixPair is a connected socket pair with small buffers, as
// net.UnixConns in the runtime's poller.
func smallUnixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func splicedFrame(text string) [][]byte {
	return [][]byte{[]byte(`{"a":"`), unsafe.Slice(unsafe.StringData(text), len(text)), []byte("\"}\n")}
}

func TestFinishPartsKeepsTheText(t *testing.T) {
	out, in := smallUnixPair(t)
	counters := &Counters{}
	o := newOutput(framing.NewWriter(out, time.Minute), counters, 0, nil)
	if !o.sleep() {
		t.Fatal("the coordinator cannot wait")
	}
	text := strings.Repeat("x", 1<<20)
	parts := splicedFrame(text)
	size := len(parts[0]) + len(text) + len(parts[2])
	w := &work{}
	counters.addInFlight(1)
	wake, kept := o.finishParts(w, parts, size)
	if !wake || !kept {
		t.Fatalf("wake %v, kept %v: the device cannot take 1 MiB at once", wake, kept)
	}
	n, blocked := o.waiting()
	if !blocked || n == 0 || n >= size || counters.PendingOutput() != int64(n) {
		t.Fatalf("waiting %d (blocked %v), held %d, of %d", n, blocked, counters.PendingOutput(), size)
	}
	start, end := uintptr(unsafe.Pointer(unsafe.StringData(text))), uintptr(unsafe.Pointer(unsafe.StringData(text)))+uintptr(len(text))
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(o.parts[0]))); p < start || p >= end {
		t.Fatal("the rest of the text is not the text's own memory")
	}

	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(io.LimitReader(in, int64(size))); got <- b }()
	o.wake()
	if !o.flush() {
		t.Fatalf("flush: %v", o.err())
	}
	if b := <-got; !bytes.Equal(b, bytes.Join(splicedFrame(text), nil)) {
		t.Fatalf("read %d bytes, not the frame", len(b))
	}
	if n, blocked := o.waiting(); n != 0 || blocked || counters.PendingOutput() != 0 {
		t.Fatalf("after the flush: waiting %d (blocked %v), held %d", n, blocked, counters.PendingOutput())
	}
}

// TestFinishPartsWriteTimeout: the rest of a spliced frame is written
// within the write timeout, or the output fails with ErrWriteTimeout and
// holds nothing.
func TestFinishPartsWriteTimeout(t *testing.T) {
	out, _ := smallUnixPair(t)
	counters := &Counters{}
	o := newOutput(framing.NewWriter(out, 100*time.Millisecond), counters, 0, nil)
	o.sleep()
	text := strings.Repeat("x", 1<<20)
	parts := splicedFrame(text)
	counters.addInFlight(1)
	if _, kept := o.finishParts(&work{}, parts, len(parts[0])+len(text)+len(parts[2])); !kept {
		t.Fatal("the device took 1 MiB at once")
	}
	o.wake()
	if o.flush() || !errors.Is(o.err(), framing.ErrWriteTimeout) {
		t.Fatalf("flush to a client that does not read: %v, want the write timeout", o.err())
	}
	if n, _ := o.waiting(); n != 0 || counters.PendingOutput() != 0 {
		t.Fatalf("after the failure: waiting %d, held %d", n, counters.PendingOutput())
	}
}

// TestFinishPartsWhileAwake: while the coordinator is awake the frame is
// copied into pending, as any final frame, and written by its flush.
func TestFinishPartsWhileAwake(t *testing.T) {
	out, in := smallUnixPair(t)
	o := newOutput(framing.NewWriter(out, time.Minute), nil, 0, nil)
	text := strings.Repeat("y", 100_000)
	parts := splicedFrame(text)
	size := len(parts[0]) + len(text) + len(parts[2])
	if wake, kept := o.finishParts(&work{}, parts, size); wake || kept {
		t.Fatalf("wake %v, kept %v while the coordinator is awake", wake, kept)
	}
	if n, _ := o.waiting(); n != size || len(o.parts) != 0 {
		t.Fatalf("pending %d of %d, parts %d", n, size, len(o.parts))
	}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(io.LimitReader(in, int64(size))); got <- b }()
	if !o.flush() {
		t.Fatal(o.err())
	}
	if b := <-got; !bytes.Equal(b, bytes.Join(parts, nil)) {
		t.Fatal("not the frame")
	}
}
