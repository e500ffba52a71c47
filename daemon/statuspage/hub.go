package statuspage

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// hub is the live stream's one producer and its viewers: at each tick
// (or when asked, after an action) it makes one snapshot, if anyone
// watches, and hands it to every viewer. A viewer holds only the newest
// snapshot it has not written yet, so a slow one skips snapshots and
// never holds the producer up; one whose write outlasts writeTimeout is
// dropped. Its methods may be called concurrently.
type hub struct {
	render       func() []byte // one snapshot, as the live region's HTML
	max          int
	writeTimeout time.Duration
	kick         chan struct{} // buffered 1: a snapshot is wanted now

	mu      sync.Mutex
	viewers map[*viewer]struct{}
	last    []byte // the newest snapshot; nil before the first
	seq     uint64 // its event id
	closed  bool
	done    chan struct{} // closed by close

	snapshots atomic.Uint64 // made so far (tests, docs: one per tick)
	dropped   atomic.Uint64 // viewers dropped for a write that timed out
}

type viewer struct {
	next chan event // buffered 1: the newest snapshot not yet written
}

type event struct {
	id   uint64
	data []byte
}

func newHub(render func() []byte, maxViewers int, writeTimeout time.Duration) *hub {
	return &hub{
		render: render, max: maxViewers, writeTimeout: writeTimeout,
		kick: make(chan struct{}, 1), viewers: map[*viewer]struct{}{}, done: make(chan struct{}),
	}
}

// run produces snapshots at each tick and each kick until ctx ends or
// close is called; without viewers it makes none.
func (h *hub) run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.done:
			return
		case <-tick:
		case <-h.kick:
		}
		h.produce()
	}
}

// produce makes one snapshot and offers it to every viewer, if there are
// any and it differs from the last (a tick where nothing changed sends
// nothing).
func (h *hub) produce() {
	h.mu.Lock()
	n := len(h.viewers)
	h.mu.Unlock()
	if n == 0 {
		return
	}
	data := h.render()
	h.snapshots.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && bytes.Equal(data, h.last) {
		return
	}
	h.seq++
	h.last = data
	ev := event{id: h.seq, data: data}
	for v := range h.viewers {
		v.offer(ev)
	}
}

// offer replaces what v has not written yet with ev. Only the producer
// sends (under the hub's lock), so the second send cannot block.
func (v *viewer) offer(ev event) {
	select {
	case v.next <- ev:
	default:
		select {
		case <-v.next:
		default:
		}
		v.next <- ev
	}
}

// wantNow asks the producer for a snapshot at once (after an action, or
// for a first viewer); asks already pending are one.
func (h *hub) wantNow() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// errFull is the refusal of a viewer beyond the bound.
type errFull struct{ max int }

func (e errFull) Error() string {
	return fmt.Sprintf("the status page already has %d live viewers (admin.max_viewers); close one, or raise admin.max_viewers", e.max)
}

// join adds a viewer, refused beyond the bound or once closed. It gets
// the newest snapshot at once, or the producer is asked for one.
func (h *hub) join() (*viewer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("the status page is closing")
	}
	if len(h.viewers) >= h.max {
		return nil, errFull{h.max}
	}
	v := &viewer{next: make(chan event, 1)}
	h.viewers[v] = struct{}{}
	if h.last != nil {
		v.next <- event{id: h.seq, data: h.last}
	} else {
		h.wantNow()
	}
	return v, nil
}

func (h *hub) leave(v *viewer) {
	h.mu.Lock()
	delete(h.viewers, v)
	if len(h.viewers) == 0 {
		h.last = nil // the next viewer gets a fresh one
	}
	h.mu.Unlock()
}

// count is the viewers now.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.viewers)
}

// close ends run and every viewer's stream; it may be called more than
// once.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// serve is GET /events: a text/event-stream of snapshots, each an event
// whose data is the live region's HTML. Beyond the bound: 503 with the
// bound named and a Retry-After.
func (h *hub) serve(w http.ResponseWriter, r *http.Request) {
	v, err := h.join()
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer h.leave(v)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A reconnecting EventSource waits this long (the stream only ends
	// when the daemon closes it or drops the viewer).
	if !h.write(w, rc, []byte("retry: 2000\n\n")) {
		return
	}
	var buf bytes.Buffer
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case ev := <-v.next:
			buf.Reset()
			encodeEvent(&buf, ev)
			if !h.write(w, rc, buf.Bytes()) {
				h.dropped.Add(1)
				return
			}
		}
	}
}

// write writes and flushes b within the write timeout.
func (h *hub) write(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	if err := rc.SetWriteDeadline(time.Now().Add(h.writeTimeout)); err != nil {
		return false
	}
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// encodeEvent writes ev in the text/event-stream format: its id, and
// each line of its data as a data field.
func encodeEvent(buf *bytes.Buffer, ev event) {
	buf.WriteString("id: ")
	buf.WriteString(strconv.FormatUint(ev.id, 10))
	buf.WriteByte('\n')
	for line := range bytes.Lines(ev.data) {
		buf.WriteString("data: ")
		buf.Write(bytes.TrimRight(line, "\r\n"))
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}
