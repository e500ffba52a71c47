// Package http serves MCP over Streamable HTTP (docs/protocol.md §13): one
// endpoint for both eras, with the era chosen from the body first
// (docs/protocol.md §13.2): a POST whose params._meta carries the 2026
// version key is a stateless 2026-07-28 exchange; initialize opens a legacy
// session (2025-11-25, 2025-06-18) named by Mcp-Session-Id in the requests
// that follow.
//
// It shares the runtime (a server.Dispatcher per view), the executor and
// the limits with the stdio transport; it knows framing, status codes,
// streams and sessions, never what a tool does. Its Handler is an
// http.Handler; NewServer wraps it in an http.Server with the timeouts
// streams need: ReadHeaderTimeout, MaxHeaderBytes and IdleTimeout are set,
// and no WriteTimeout or ReadTimeout, which are absolute deadlines that
// would cut every SSE stream. Each response sets its own write deadline
// per write, and each body its own read deadline, through
// http.ResponseController.
//
// SSE (text/event-stream) answers a listen, a request with a
// progressToken, or a legacy session's tools/call, when Accept lists it.
// Each event is one data: line holding one compact message, flushed at
// once; an idle stream gets a ": keep-alive" comment every KeepAlive
// (15 s); no event ids, no resumability; X-Accel-Buffering: no keeps
// nginx from buffering.
//
// The package never closes the listener it is served on, and never
// retries a write: a response whose write fails or times out is over.
package http
