//go:build soak

package e2e_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// The soak's flood (docs/upstreams.md §5): every 60 s a session that declared
// sampling, elicitation and roots, and never answers, calls the flood
// upstream's flood tool, which writes requests to it with fresh ids as
// fast as it can for 5 s. The daemon holds upstreams.max_server_requests
// of them and refuses the rest at once; the other sessions' calls go on
// being served, and the goroutines and RSS of the samples stay flat.
//
// The output flood (docs/transport.md §11.5): every 45 s one client asks for
// outputFloodCalls answers of 4 MB and never reads them; each must be cut
// off at the write timeout, and the daemon's buffers stay within
// daemon.max_buffered_bytes.

// flood runs one flood and counts it.
func (h *soakHarness) flood(t *testing.T) {
	s, err := dialSession(h.d.socket)
	if err != nil {
		h.fail("flood: dial", err)
		return
	}
	defer s.Close()
	if err := s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"soak-flood","version":"1"}}}`); err != nil {
		h.fail("flood: initialize", err)
		return
	}
	if _, err := s.answer("0", answerWithin); err != nil {
		h.fail("flood: initialize", err)
		return
	}
	if err := s.send(initializedLine, callLine(1, "flood__flood", `{"ms":5000}`)); err != nil {
		h.fail("flood: call", err)
		return
	}
	answer, _ := floodAnswer(t, s, 1)
	peak := 0
	for done := false; !done; {
		select {
		case r := <-answer:
			done = true
			var counts struct{ Sent, Refused int }
			if r.Error != nil || json.Unmarshal(structuredOf(r), &counts) != nil {
				h.fail("flood", fmt.Errorf("the flooding call answered %s %+v", r.Result, r.Error))
				return
			}
			h.floods.Add(1)
			h.floodSent.Add(int64(counts.Sent))
			h.floodRefused.Add(int64(counts.Refused))
			if counts.Refused == 0 {
				h.fail("flood", fmt.Errorf("%d requests, none refused", counts.Sent))
			}
		default:
			if st, err := h.d.status(t.Context()); err == nil {
				peak = max(peak, st.Goroutines)
			}
		}
	}
	h.mu.Lock()
	h.floodPeak = max(h.floodPeak, peak)
	h.mu.Unlock()
}

// outputFloodCalls is how many answers of 4 MB an output flood asks for.
const outputFloodCalls = 16

// outputFlood is a client that asks for large answers and never reads
// them (docs/transport.md §11.5): its session must end at the write timeout, the
// daemon's buffers stay within their budget, and the other sessions go on.
func (h *soakHarness) outputFlood(t *testing.T) {
	h.outputFloods.Add(1)
	s, err := dialSession(h.d.socket)
	if err != nil {
		h.fail("output flood", err)
		return
	}
	defer s.Close()
	if raw, err := s.c.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}
	if err := s.initialize("2025-06-18"); err != nil {
		h.fail("output flood", err)
		return
	}
	st, err := h.d.status(t.Context())
	if err != nil || len(st.Sessions) == 0 {
		h.fail("output flood", fmt.Errorf("status: %v", err))
		return
	}
	id := st.Sessions[len(st.Sessions)-1].ID // the newest
	var lines []string
	for i := range outputFloodCalls {
		lines = append(lines, callLine(10+i, "big", `{"bytes":4000000}`))
	}
	if err := s.send(lines...); err != nil {
		h.fail("output flood", err)
		return
	}
	if eventually.Within(time.Minute, func() bool {
		st, err := h.d.status(t.Context())
		if err != nil {
			return false
		}
		if b := st.BufferedBytes; b > h.mostBuffered.Load() {
			h.mostBuffered.Store(b)
		}
		return !slices.ContainsFunc(st.Sessions, func(x control.Session) bool { return x.ID == id })
	}) {
		h.outputFloodsCut.Add(1)
		return
	}
	h.fail("output flood", fmt.Errorf("session %d still served a minute after it stopped reading", id))
}
