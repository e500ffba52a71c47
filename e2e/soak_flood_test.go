//go:build soak

package e2e_test

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The soak's flood (docs/upstreams.md §5): every 60 s a session that declared
// sampling, elicitation and roots, and never answers, calls the flood
// upstream's flood tool, which writes requests to it with fresh ids as
// fast as it can for 5 s. The daemon holds upstreams.max_server_requests
// of them and refuses the rest at once; the other sessions' calls go on
// being served, and the goroutines and RSS of the samples stay flat.

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
