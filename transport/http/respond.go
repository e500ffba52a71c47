package http

import (
	"mime"
	nethttp "net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snodod/snodod/protocol"
)

// responder writes one HTTP response: either one JSON body, or an SSE
// stream of events (docs/protocol.md §13.1). It is used by one goroutine, the
// one serving the request, which is the response's only writer. The status
// line is committed as late as possible, so that errors found before the
// first event still choose their status (docs/protocol.md §13.1).
//
// Every write carries its own deadline (Options.WriteTimeout), set through
// http.ResponseController: the server has no WriteTimeout, which would be
// an absolute deadline on a stream's whole life. A write that fails or
// misses its deadline ends the response; nothing is written after it.
type responder struct {
	w       nethttp.ResponseWriter
	rc      *nethttp.ResponseController
	timeout time.Duration

	sse       bool // the status line committed an SSE stream
	committed bool
	failed    bool
	buf       []byte
}

func newResponder(w nethttp.ResponseWriter, timeout time.Duration) *responder {
	return &responder{w: w, rc: nethttp.NewResponseController(w), timeout: timeout}
}

// json writes frame (one JSON-RPC message ending in "\n") as the whole
// response with status. On a committed stream it is written as an event
// instead, whatever status says.
func (r *responder) json(status int, frame []byte) bool {
	if r.sse {
		return r.event(frame)
	}
	if r.committed || r.failed {
		return false
	}
	r.committed = true
	h := r.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(frame)))
	h.Set("Cache-Control", "no-store")
	r.deadline()
	r.w.WriteHeader(status)
	return r.write(frame)
}

// empty writes a response without a body (202, 204, 405).
func (r *responder) empty(status int) {
	if r.committed || r.failed {
		return
	}
	r.committed = true
	r.w.Header().Set("Content-Length", "0")
	r.deadline()
	r.w.WriteHeader(status)
	_ = r.rc.Flush()
}

// startSSE commits a 200 text/event-stream response and flushes it, so a
// client (and a proxy that holds headers until a body byte arrives) sees
// the stream at once.
func (r *responder) startSSE() bool {
	if r.sse {
		return !r.failed
	}
	if r.committed || r.failed {
		return false
	}
	r.committed, r.sse = true, true
	h := r.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer this response
	r.deadline()
	r.w.WriteHeader(nethttp.StatusOK)
	return r.flush()
}

// event writes one SSE event holding frame: one data line (the encoder
// escapes every line break inside a message), a blank line, then a flush.
func (r *responder) event(frame []byte) bool {
	if !r.startSSE() {
		return false
	}
	frame = frame[:len(frame)-1] // the frame's own "\n"
	r.buf = append(append(append(r.buf[:0], "data: "...), frame...), "\n\n"...)
	r.deadline()
	if !r.write(r.buf) {
		return false
	}
	if cap(r.buf) > 64<<10 {
		r.buf = nil
	}
	return r.flush()
}

// comment writes ": keep-alive" on a committed stream, or commits the
// stream with it: a long call then gets its status line before a proxy's
// first-byte timeout, and an idle stream outlives nginx's read timeout.
func (r *responder) comment() bool {
	if !r.startSSE() {
		return false
	}
	r.deadline()
	return r.write([]byte(": keep-alive\n\n")) && r.flush()
}

func (r *responder) deadline() {
	_ = r.rc.SetWriteDeadline(time.Now().Add(r.timeout))
}

func (r *responder) write(b []byte) bool {
	if r.failed {
		return false
	}
	if _, err := r.w.Write(b); err != nil {
		r.failed = true
		return false
	}
	return true
}

func (r *responder) flush() bool {
	if r.failed {
		return false
	}
	if err := r.rc.Flush(); err != nil {
		r.failed = true
		return false
	}
	return true
}

// refuse writes a JSON-RPC error as the whole response.
func refuse(w nethttp.ResponseWriter, status int, id protocol.ID, e *protocol.Error, timeout time.Duration) {
	newResponder(w, timeout).json(status, protocol.AppendError(nil, id, e))
}

// accepts reports whether the Accept header lists media type want
// (exactly, parameters ignored).
func accepts(r *nethttp.Request, want string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), want) {
				return true
			}
		}
	}
	return false
}

// jsonContent reports whether Content-Type is application/json, with any
// parameters (charset=utf-8).
func jsonContent(r *nethttp.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}
