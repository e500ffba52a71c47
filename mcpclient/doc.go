// Package mcpclient is snodod's MCP client: it connects to one MCP server
// over a Transport and speaks MCP to it, as the servers snodod hosts
// expect of their client (docs/upstreams.md §4 to §6).
//
// The surface is small, after the go-sdk's client: Connect opens a
// Transport and performs the handshake (the era probe, then initialize or
// server/discover) and returns a Conn; Conn.Call sends one request with an
// id of the Conn's own, with the client's progress, cancellation and
// per-hop _meta translated; Conn.List fetches every page of a list;
// Conn.Notify and Conn.Ping; Conn.Stop and Conn.Done end it. What the
// server sends on its own (notifications, and requests such as sampling,
// elicitation and roots) goes to a Handler, which must not block: a
// server's request waiting for its answer holds no goroutine, and at most
// Options.MaxServerRequests are held at once.
//
// A Transport is "a bidirectional message stream to one server": Open
// gives a Stream that reads the server's messages (judged by
// protocol.DecodeFromServer, the one decoder of both ends) and queues
// messages for it without waiting on it. Command is the transport of a
// hosted server: a child process in a group of its own, its stdin and
// stdout NDJSON (read and written with internal/framing, as the session
// transport does), its stderr kept in a StderrRing within a StderrBudget
// and logged, its stop graceful (stdin closed, SIGTERM, SIGKILL to the
// group). HTTP is the transport of a remote server: Streamable HTTP in
// both eras (2026-07-28's stateless POSTs; the 2025 eras' sessions, GET
// stream and resumption) and the HTTP+SSE transport of 2024-11-05, over an
// http.Client whose transport carries TLS, proxies and, through
// mcpclient/oauth, the server's authorization.
//
// The package knows nothing of sessions, views, the runtime or the
// configuration: who a call is for is an opaque CallOptions.Owner handed
// back with the server's requests, for the caller (upstream/) to decide
// whose they are. It imports protocol, limits, internal/ and its own
// oauth package only.
//
// Tests: the package's only TestMain is in conn_main_test.go (it builds
// internal/fakeupstream once into fakePath, makes the test a child
// subreaper, and runs goleak).
package mcpclient
