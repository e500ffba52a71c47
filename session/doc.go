// Package session binds a device (a pipe pair, a stream socket or a
// pseudo-terminal) to the stdio transport and the shared runtime, as a
// suture.Service that supervises its own transport instance.
//
// A Device is one connection's descriptors, prepared once: made
// non-blocking so deadlines work, a terminal put into raw mode, end of input
// on a hung-up terminal read as EOF (docs/transport.md §3.4). It is owned above
// the session and outlives every instance that serves it: when a transport
// instance fails, the session starts a new one on its own goroutine, on the
// same Device, stdio.Reader and server.SessionState, so no buffered byte is lost
// and the client sees no close (docs/transport.md §12.4). Only end of input, a
// terminal write failure, shutdown, or failing too often end a Session; it
// then closes its Device.
//
// A session can also continue in another process (handover.go): HandOver
// pauses it and returns its Record and descriptors, and Resume continues
// it from them, in a new daemon after an upgrade or after a crash; the
// device is left as the session put it (a terminal raw) and restored only
// when the session finally ends. A Config's Journal keeps a record of a
// running session for a successor after a crash.
//
// The package never listens, accepts or passes descriptors: the daemon
// does, and hands each connection to NewDevice and New.
package session
