// Package load drives MCP servers with raw NDJSON and measures them: the
// stdio scenarios against a spawned server process (stdio.go) and the
// many-session scenarios against `snodod serve` (sessions.go). It uses no
// MCP SDK: every line is written by package wire and read back with its
// scanner.
package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/snodod/snodod/bench/internal/wire"
)

// ErrTimeout is returned by Conn.Next when no line came in time.
var ErrTimeout = errors.New("no line in time")

// Line is one line read from the server, and when it was read.
type Line struct {
	At    time.Time
	Bytes []byte // without the newline; owned by the receiver
	wire.Frame
}

// Conn is one NDJSON connection to a server: a writer for request lines
// and a goroutine that reads lines and hands them over in order.
//
// Send may be called from several goroutines; Next from one.
type Conn struct {
	wmu sync.Mutex
	w   *bufio.Writer

	lines    chan Line
	stop     chan struct{} // closed by Discard
	stopOnce sync.Once
	done     chan struct{} // closed when the reader has ended
	err      error         // why the reader ended; read after done
}

// NewConn starts reading r. buffer is how many lines may wait unread
// before the reader stops reading (then the server's writes block, as
// they would with a slow client).
func NewConn(r io.Reader, w io.Writer, buffer int) *Conn {
	c := &Conn{
		w:     bufio.NewWriterSize(w, 16<<10),
		lines: make(chan Line, buffer),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go c.read(r)
	return c
}

func (c *Conn) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, 4<<10)
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		at := time.Now() // the line is whole: copying it is not the server's time
		var line []byte
		if long != nil {
			line = append(long, chunk...)
			long = nil
		} else {
			line = bytes.Clone(chunk)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			select {
			case c.lines <- Line{At: at, Bytes: line, Frame: wire.Parse(line)}:
			case <-c.stop:
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			c.err = err
			return
		}
	}
}

// Discard makes the reader drop every line from now on (it goes on
// reading until the server closes its output).
func (c *Conn) Discard() { c.stopOnce.Do(func() { close(c.stop) }) }

// Done is closed when the server has closed its output (or reading it
// failed).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Send writes one line (newline included) and flushes it.
func (c *Conn) Send(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(line); err != nil {
		return err
	}
	return c.w.Flush()
}

// Next returns the next line, ErrTimeout when none came within timeout,
// or the reader's error (io.EOF when the server closed its output) once
// every line read has been returned.
func (c *Conn) Next(timeout time.Duration) (Line, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l := <-c.lines:
		return l, nil
	case <-c.done:
		select {
		case l := <-c.lines:
			return l, nil
		default:
			return Line{}, c.err
		}
	case <-t.C:
		return Line{}, ErrTimeout
	}
}

// Await returns the next response with the given integer id, skipping
// notifications and other responses (which are returned in skipped).
func (c *Conn) Await(id int64, timeout time.Duration) (l Line, skipped []Line, err error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := c.Next(time.Until(deadline))
		if err != nil {
			return Line{}, skipped, err
		}
		if got, ok := l.IntID(); ok && got == id && (l.Kind == wire.Result || l.Kind == wire.Error) {
			return l, skipped, nil
		}
		skipped = append(skipped, l)
	}
}

// Call sends one request line with integer id and awaits its response.
func (c *Conn) Call(line []byte, id int64, timeout time.Duration) (Line, error) {
	if err := c.Send(line); err != nil {
		return Line{}, fmt.Errorf("send request %d: %w", id, err)
	}
	l, _, err := c.Await(id, timeout)
	if err != nil {
		return Line{}, fmt.Errorf("request %d: %w", id, err)
	}
	return l, nil
}

// Handshake does what a client of d does before its first call: for
// 2025-06-18, initialize (awaiting its answer) and initialized; for
// 2026-07-28, nothing.
func (c *Conn) Handshake(d wire.Dialect, timeout time.Duration) error {
	if d.Stateless() {
		return nil
	}
	req, initialized := d.Initialize()
	l, err := c.Call(req, 0, timeout)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if l.Kind != wire.Result {
		code, msg := l.ErrorCode()
		return fmt.Errorf("initialize: error %d %s", code, msg)
	}
	return c.Send(initialized)
}

// CheckEcho reports what is wrong with l as the answer to echo call id
// (whose text is wire.EchoText(id)), or "".
func CheckEcho(l Line, id int64) string {
	switch {
	case l.Kind == wire.Error:
		code, msg := l.ErrorCode()
		return fmt.Sprintf("error %d %q", code, msg)
	case l.Kind != wire.Result:
		return "a " + l.Kind.String() + ", not a result"
	case l.IsError():
		return fmt.Sprintf("isError result %.200s", l.Bytes)
	case string(l.Text()) != wire.EchoText(id):
		return fmt.Sprintf("wrong text %.60q for %q", l.Text(), wire.EchoText(id))
	}
	return ""
}
