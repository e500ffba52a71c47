package http

import (
	nethttp "net/http"
	"sync/atomic"
)

// What the handler answered, by HTTP status (Stats.Statuses): counted
// when each response ends (a stream when it closes), from the status its
// writer was given. net/http's own answers to requests it cannot parse
// never reach the handler and are not counted.

// statusCounts counts the responses of each status from 100 to 599.
type statusCounts [500]atomic.Uint64

func (c *statusCounts) add(status int) {
	if status >= 100 && status < 600 {
		c[status-100].Add(1)
	}
}

func (c *statusCounts) snapshot() map[int]uint64 {
	out := map[int]uint64{}
	for i := range c {
		if n := c[i].Load(); n > 0 {
			out[i+100] = n
		}
	}
	return out
}

// statusWriter remembers the status of the response it writes. Unwrap
// gives http.ResponseController (which the responder flushes and sets
// deadlines with) the connection's own writer.
type statusWriter struct {
	nethttp.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = nethttp.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() nethttp.ResponseWriter { return w.ResponseWriter }
