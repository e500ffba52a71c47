// Package server is the transport-neutral MCP runtime of snodod.
//
// A Server holds one catalog (tools, resources, resource templates, prompts
// and completions) shared by every session of a process, and serves it as
// a Dispatcher in the three protocol versions snodod speaks: 2025-06-18 and
// 2025-11-25 after a legacy initialize, and the stateless 2026-07-28, chosen
// per request (docs/protocol.md §1.2). Register capabilities with the typed
// AddTool (schemas inferred from Go types), Server.AddTool, AddResource,
// AddResourceTemplate, AddPrompt and the completion methods; they may be
// called at any time, from any goroutine, and subscribed sessions are told
// of the change.
//
// Handlers get a context that ends when their request is cancelled, times
// out or its connection goes; through it they report progress
// (ReportProgress), log to legacy clients (Log) and ask the client for
// input (Elicit, Sample, ListRoots): a 2026 client through multi-round-trip
// requests, a legacy one by a request the transport sends it
// (RequestClient, ClientRequester). A SessionState holds the little a
// connection keeps: its legacy state, its subscriptions, and the ids and
// places of its requests to the client.
//
// Handlers run on the shared executor of package server/executor, which
// admits, queues, times out and cancels them for every connection of the
// process; a handler that waits on something outside the process gives its
// slot back there (executor.Detach, executor.ExtendDeadline).
//
// The package never does I/O on devices: it knows nothing of bytes, framing
// or JSON-RPC lines. Transports decode requests, hand them to Dispatch and
// write what comes back.
package server
