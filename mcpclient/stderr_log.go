package mcpclient

import (
	"time"
)

// What `snodod logs NAME` shows of a StderrRing: every line after the time
// it was written, and a mark where an instance started, so that the
// history across restarts reads as one log. The ring's bytes stay as the
// server wrote them (error messages quote their tail); the times and
// marks are kept beside them, by position in the stream, and rendered on
// the way out.

// maxStamps bounds the marks a ring keeps: one per write of the child's
// stderr (a read of its pipe) and one per start. A server that writes
// more than this many times within the ring's bytes gets the times of its
// newest writes only; its older lines show the time of the oldest mark
// kept.
const maxStamps = 4096

// stampLayout is the time of a line, as the daemon's own log writes it.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// stamps are a ring's times and marks; they are guarded by the ring's mu.
type stamps struct {
	written int64     // bytes written since the ring was made
	marks   []mark    // by pos; none before the oldest byte held, but notes at it
	base    time.Time // the time of the newest time mark dropped
	midLine bool      // the followers' rendering is inside a line
}

// mark is a time (bytes from pos on were written at t) or, with a note, a
// line of snodod's own before the byte at pos.
type mark struct {
	pos  int64
	t    time.Time
	note string
}

// Mark adds a line of snodod's own to the log, such as the start of an
// instance: `snodod logs` shows it as "TIME --- note ---" where it was
// added, on a line of its own.
func (r *StderrRing) Mark(note string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks = append(r.marks, mark{pos: r.written, t: now, note: note})
	r.trim(r.written - int64(r.n))
	var b []byte
	if r.midLine {
		b = append(b, '\n')
	}
	r.midLine = false
	r.send(appendNote(b, now, note))
}

// wrote records that n bytes were written at t, of which the ring now
// holds the newest held; r.mu is held.
func (r *StderrRing) wrote(n int, t time.Time, held int) {
	r.marks = append(r.marks, mark{pos: r.written, t: t})
	r.written += int64(n)
	r.trim(r.written - int64(held))
}

// trim drops the marks of bytes no longer held (start is the position of
// the oldest held), and the oldest beyond maxStamps.
func (r *StderrRing) trim(start int64) {
	drop := 0
	for drop < len(r.marks) && (r.marks[drop].pos < start || len(r.marks)-drop > maxStamps) {
		if r.marks[drop].note == "" {
			r.base = r.marks[drop].t
		}
		drop++
	}
	if drop > 0 {
		r.marks = append(r.marks[:0], r.marks[drop:]...)
	}
}

// stamp renders p, written at t, for the followers: a time at each line's
// start; r.mu is held.
func (r *StderrRing) stamp(dst, p []byte, t time.Time) []byte {
	if len(r.followers) == 0 {
		r.midLine = p[len(p)-1] != '\n'
		return nil
	}
	for _, c := range p {
		if !r.midLine {
			dst = appendStamp(dst, t)
			r.midLine = true
		}
		dst = append(dst, c)
		if c == '\n' {
			r.midLine = false
		}
	}
	return dst
}

// render is what the ring holds with its times and marks; r.mu is held.
func (r *StderrRing) render() []byte {
	held := make([]byte, r.n)
	r.copyOut(held)
	start := r.written - int64(r.n)
	out := make([]byte, 0, len(held)+len(held)/2)
	cur, mid, next := r.base, false, 0
	for i := 0; ; i++ {
		for ; next < len(r.marks) && r.marks[next].pos <= start+int64(i); next++ {
			m := r.marks[next]
			if m.note == "" {
				cur = m.t
				continue
			}
			if mid {
				out = append(out, '\n')
			}
			out, mid = appendNote(out, m.t, m.note), false
		}
		if i == len(held) {
			return out
		}
		if !mid {
			out, mid = appendStamp(out, cur), true
		}
		out = append(out, held[i])
		if held[i] == '\n' {
			mid = false
		}
	}
}

// appendStamp appends the time of a line and a space; a line older than
// every time kept gets dashes of the same width.
func appendStamp(b []byte, t time.Time) []byte {
	if t.IsZero() {
		for range len(time.Now().Format(stampLayout)) {
			b = append(b, '-')
		}
		return append(b, ' ')
	}
	return append(t.AppendFormat(b, stampLayout), ' ')
}

func appendNote(b []byte, t time.Time, note string) []byte {
	b = appendStamp(b, t)
	b = append(b, "--- "...)
	b = append(b, note...)
	return append(b, " ---\n"...)
}
