// Package daemon is the snodod process: it hosts many MCP sessions, each
// supervised on its own, behind two Unix sockets.
//
// The session socket takes one session per connection. The control socket
// speaks a small JSON-lines protocol, whose wire types and client are
// package daemon/control's: "connect" hands the caller's standard input
// and output to the daemon over SCM_RIGHTS, so the daemon serves the
// client's own pipe or pty directly; "status" reports the sessions, the
// executor's load and the hosted servers; "logs" the hosted servers'
// standard error and the daemon's own log (logring.go). Under systemd the sockets may be passed
// in (socket activation), and the daemon reports its state with sd_notify.
//
// A Daemon owns the listeners, the root supervisor (suture) and every
// descriptor it accepted or received; sessions (package session) own the
// protocol. The daemon never loads configuration itself: the caller passes
// a validated *config.Config, and a function to load it again on SIGHUP.
//
// Lifecycle: New builds the catalog and the shared executor; Run listens,
// reports READY=1, serves until its context ends, then drains (stop
// accepting, end every session within daemon.shutdown_grace) and returns
// nil. Reload applies a new configuration to the sessions that start after
// it; the running ones keep theirs.
//
// Every session is an entry of one table (table.go), from its admission
// (or its resumption) to its reap, which is the only way out.
//
// A restart of the daemon loses no session (docs/operations.md). An
// upgrade (`snodod upgrade`, SIGUSR2; upgrade.go) starts a new process and
// hands it the listeners and every session over a private socket
// (upgrade_wire.go); the new process's Run takes them (adopt.go) instead of
// listening. Under systemd every session's descriptors and a memfd crash
// record (journal.go) stay in the service manager's descriptor store
// (fdstore.go), and a daemon started after a crash resumes the sessions
// from them (crash.go). Run sees neither way apart: it asks its origin
// (continuity.go) for the listeners and the sessions.
package daemon
