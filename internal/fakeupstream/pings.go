package main

import "flag"

// -pings: how the fake answers ping (snodod's health pings, docs/upstreams.md
// §4) while it goes on answering everything else: "answer" ({}), "ignore"
// (never: an unresponsive server), or "error" (-32601, which is alive
// too). Each ping is recorded in history like any request.

var pingMode = flag.String("pings", "answer", "answer, ignore or error")

// ping serves ping; answer false leaves it unanswered.
func (s *server) ping() (result any, rerr *rpcError, answer bool) {
	switch *pingMode {
	case "ignore":
		return nil, nil, false
	case "error":
		return nil, &rpcError{Code: -32601, Message: "Method not found: ping"}, true
	}
	return map[string]any{}, nil, true
}
