// Package server is the transport-neutral runtime of snodod: the dispatch
// surface that serves admitted requests (Dispatcher, Request, Outcome,
// Stream), progress reporting, and the shared Executor that admits, queues,
// runs, times out and cancels request handlers for every connection.
//
// The package never does I/O on devices: it knows nothing of bytes, framing
// or JSON-RPC lines. Transports decode requests, hand them to this package
// and write what comes back.
package server
