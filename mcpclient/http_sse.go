package mcpclient

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// sseEvent is one server-sent event (the WHATWG HTML "server-sent events"
// section, as MCP uses it): its type ("message" when the stream named
// none), its data (the data lines joined by "\n"), its id when it had
// one. Data is nil for an event over the message limit, whose first and
// last bytes head and tail keep for the id of the response it carried.
type sseEvent struct {
	typ        string
	data       []byte
	id         string
	hasID      bool
	tooLong    bool
	head, tail []byte
}

// sseReader reads events from an SSE body, each event's data bounded by
// limit bytes (Options.MaxLineBytes: one message). A line over the limit
// is not kept: the event it belongs to is reported tooLong, with the start
// and end of its data, and the rest of it skipped. The reader also keeps
// the stream's last event id and its retry delay, which a resumption uses
// (MCP 2025-11-25, transports, "Resumability and Redelivery").
type sseReader struct {
	r     *bufio.Reader
	limit int

	lastID string        // the last id field seen, "" for none yet
	retry  time.Duration // the last retry field, 0 for none yet
}

func newSSEReader(body io.Reader, limit int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(body, 32<<10), limit: limit}
}

// errEventTooLong is a line of a field other than data over the limit: the
// stream is not an MCP stream (nothing MCP sends has such a field).
var errEventTooLong = errors.New("an event's field exceeds the message limit")

// next returns the next event that has data or an id, io.EOF at the end of
// the stream (an event not ended by a blank line is dropped, as the
// standard says), or the read error.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []byte
	dataLines := 0
	for {
		line, long, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if long != nil {
			// A data line over the limit: the event's data is dropped,
			// its ends kept for the id.
			if !bytes.HasPrefix(long.head, []byte("data:")) {
				return sseEvent{}, errEventTooLong
			}
			ev.tooLong = true
			if ev.head == nil {
				ev.head = trimField(long.head, "data")
			}
			ev.tail = long.tail
			data = nil
			continue
		}
		if len(line) == 0 {
			if dataLines == 0 && !ev.hasID && !ev.tooLong {
				ev = sseEvent{}
				continue // a comment-only or empty event
			}
			if ev.typ == "" {
				ev.typ = "message"
			}
			if !ev.tooLong {
				ev.data = data
				if ev.data == nil {
					ev.data = []byte{}
				}
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: keep-alives
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "data":
			if ev.tooLong {
				continue
			}
			if dataLines > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
			dataLines++
			if len(data) > s.limit {
				ev.tooLong = true
				ev.head = append([]byte(nil), data[:min(len(data), watchBytes)]...)
				ev.tail = append([]byte(nil), data[len(data)-min(len(data), watchBytes):]...)
				data = nil
			}
		case "event":
			ev.typ = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id, ev.hasID = string(value), true
				s.lastID = ev.id
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// longLine is a line over the limit: its first and last watchBytes.
type longLine struct{ head, tail []byte }

// line reads one line without its end (LF, CRLF), or reports one over the
// limit (plus a margin for its field name) without keeping it.
func (s *sseReader) line() ([]byte, *longLine, error) {
	max := s.limit + 16
	var buf []byte
	var long *longLine
	for {
		chunk, err := s.r.ReadSlice('\n')
		if long == nil && len(buf)+len(chunk) > max {
			long = &longLine{head: append([]byte(nil), append(buf, chunk...)[:watchBytes]...)}
			buf = nil
		}
		if long != nil {
			if len(chunk) > 0 {
				t := bytes.TrimRight(chunk, "\r\n")
				if len(t) >= watchBytes {
					long.tail = append(long.tail[:0], t[len(t)-watchBytes:]...)
				} else {
					long.tail = append(long.tail, t...)
					if len(long.tail) > watchBytes {
						long.tail = long.tail[len(long.tail)-watchBytes:]
					}
				}
			}
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case err == nil:
			if long != nil {
				return nil, long, nil
			}
			buf = bytes.TrimSuffix(buf[:len(buf)-1], []byte("\r"))
			return buf, nil, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if errors.Is(err, io.EOF) && len(buf) == 0 && long == nil {
				return nil, nil, io.EOF
			}
			if errors.Is(err, io.EOF) {
				return nil, nil, io.ErrUnexpectedEOF // an event cut in its middle
			}
			return nil, nil, err
		}
	}
}

// trimField removes "name:" and one space from the start of a line.
func trimField(line []byte, name string) []byte {
	line = bytes.TrimPrefix(line, []byte(name+":"))
	return bytes.TrimPrefix(line, []byte(" "))
}
