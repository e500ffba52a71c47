// Package statuspage is the daemon's live status page
// (docs/observability.md, "Status page"): the hosted servers, the
// sessions, each tool's calls and latency and the last log lines, as one
// server-rendered HTML page that reads without JavaScript, and a stream
// of server-sent events (/events) that a little embedded script swaps
// into it. One producer makes one snapshot per tick, however many
// viewers watch; their number is bounded, and a viewer whose write
// outlasts its timeout is dropped, so that no viewer holds anything up.
// Its buttons run what the command line runs (restart a server, end a
// session, approve what a pinned server holds, log in to a remote
// server) behind the admin listener's authentication and a CSRF check;
// approving and logging in only for the daemon's own user or the admin
// token, as the control socket.
//
// It keeps no books of its own: everything it shows comes from the
// daemon's status snapshot (what `snodod status` shows), the metrics'
// request instruments and the daemon's log ring. It never serves MCP,
// and it loads nothing from anywhere but itself (Content-Security-Policy
// default-src 'self').
package statuspage
