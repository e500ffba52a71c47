package main

import (
	"flag"
	"sync/atomic"
)

// -url-elicitation: the elicit tool of a legacy fake answers its first
// call with -32042 (URL elicitation required, 2025-11-25), listing one URL
// to open, and every later call with structuredContent {authorized: true,
// calls: N}, as a server that needed the user to sign in once does.

var urlElicitation = flag.Bool("url-elicitation", false, "legacy: the first elicit call answers -32042 (URL elicitation required)")

// elicitCalls counts the elicit calls under -url-elicitation.
var elicitCalls atomic.Int64

// urlElicit serves the elicit tool under -url-elicitation.
func (s *server) urlElicit() (any, *rpcError, bool) {
	n := elicitCalls.Add(1)
	if n == 1 {
		return nil, &rpcError{Code: -32042, Message: "This request requires more information.", Data: map[string]any{
			"elicitations": []any{map[string]any{
				"mode": "url", "elicitationId": "fake-url-1",
				"url": "https://fake.test/authorize?id=fake-url-1", "message": "Sign in to fake to go on.",
			}},
		}}, true
	}
	return structured(map[string]any{"authorized": true, "calls": n}), nil, true
}
