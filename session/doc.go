// Package session binds a device (a pipe pair, a stream socket or a
// pseudo-terminal) to the stdio transport and the shared runtime, as a
// suture.Service that supervises its own transport instance.
//
// A Device is one connection's descriptors, prepared once: made
// non-blocking so deadlines work, a terminal put into raw mode, end of input
// on a hung-up terminal read as EOF (transport.md §3.4). It is owned above
// the session and outlives every instance that serves it: when a transport
// instance fails, the session starts a new one on its own goroutine, on the
// same Device, stdio.Reader and server.SessionState, so no buffered byte is lost
// and the client sees no close (transport.md §12.4). Only end of input, a
// terminal write failure, shutdown, or failing too often end a Session; it
// then closes its Device.
//
// The package never listens, accepts or passes descriptors: the daemon
// does, and hands each connection to NewDevice and New.
package session
