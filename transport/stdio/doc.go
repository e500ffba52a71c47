// Package stdio serves one MCP connection of newline-delimited JSON-RPC over
// any reader and writer: a client's pipes, a Unix socket, a terminal
// (docs/transport.md).
//
// A connection has three parts. The Reader reads lines of at most the line
// limit on its own goroutine; it outlives a Transport, so that a session
// restarted on the same device loses no byte. The coordinator (Serve's
// goroutine) owns the connection's state: it decodes and classifies lines,
// admits requests to the shared executor.Executor and never waits on a
// handler. Handlers run on the executor's workers. A legacy request's
// handler may send requests to the client (server.RequestClient): the
// coordinator writes them and routes the client's responses back
// (docs/transport.md §7.1).
//
// Two shortcuts (docs/architecture.md §4.1, §4.2) skip hops between
// goroutines where they cost more than the work:
//
//   - The Dispatcher answers the methods that never block (the
//     runtime's ping, lists and server/discover) on the coordinator,
//     without the executor (server.Dispatcher's DispatchInline).
//   - The worker that finished a request commits its final frame to the
//     connection's output itself (output.go) instead of handing the outcome
//     back to the coordinator; it writes the frame too when the
//     coordinator is waiting, with one non-blocking write, and leaves to
//     the coordinator whatever the device does not take at once. One
//     writer at a time still owns the device, frames are whole and in
//     commit order, nothing is written for a request once its
//     cancellation is processed (both change its state under the output's
//     lock), and its progress, committed before the handler hears back,
//     precedes it. A listen stream, a legacy request that sent requests to
//     the client, and a device without deadlines still hand the outcome to
//     the coordinator through a mailbox whose post never blocks, so a
//     worker never waits on a connection whose writer is stuck.
//
// Two things are done in batches, where docs/transport.md §11.2 describes them
// one at a time, because a hand-off between goroutines and a write(2) per
// line cost more than the work on this machine's requests:
//
//   - The Reader hands over the lines one read completed together (at most
//     256). It holds at most one such batch undelivered: one read's worth,
//     or one long line, as the line limit bounds it.
//   - Frames committed while the coordinator handles lines and outcomes
//     wait until nothing else is at hand, then go out in one write of at
//     most 64 KiB plus one frame; a worker that writes yields once first,
//     so that the frames of workers finishing with it share its write.
//     Progress notifications, request-scoped notifications, stream events
//     and the listen acknowledgement are written before the coordinator
//     moves on, so a handler reporting progress still waits for its frame
//     to be written.
//
// Frames never interleave or split, the write timeout bounds each write,
// and a failed write still ends the connection with nothing written after
// it.
//
// On a descriptor (syscall.Conn), the Reader reads into a buffer from a
// shared list and gives it back before it waits in the runtime's poller: a
// connection waiting for input on a non-blocking descriptor holds no read
// buffer.
//
// A connection can be handed to another process (handoff.go): with
// ErrHandOver as the cause of Serve's context it pauses instead of ending,
// Reader.Detach returns the input read and not handled (carry.go), and a
// Transport in the other process continues from NewReaderFrom and Resume
// (resume.go). A Journal (journal.go) is told of the requests in flight and
// the listen streams, for an owner that keeps a record across its crash.
package stdio
