package mcpclient

import (
	"context"
	"strconv"

	"github.com/snodod/snodod/protocol"
)

// Transport opens a message stream to one MCP server. Command, a child
// process spoken to over its stdin and stdout, is the transport of hosted
// servers; remote servers (Streamable HTTP in both eras, and the older
// HTTP+SSE) are transports of their own, next to it. A Transport is a
// description: each Open starts a new connection.
type Transport interface {
	// Open starts the connection (spawns the process, connects) and
	// returns its stream. ctx bounds the opening only, not the stream's
	// life. On error nothing is left running.
	Open(ctx context.Context, l Link) (Stream, error)
}

// Link is what a Transport is given to open a stream for a Conn.
type Link struct {
	// Options are the Conn's, defaults applied: MaxLineBytes bounds one
	// message, Logger and Name say whose logs they are.
	Options *Options
	// TooLong reports a message over MaxLineBytes, which the stream
	// dropped, once the transport knows which request it answered (over
	// stdio: when the line ends, its id read at either end): the Conn
	// fails that call. It may be called from any goroutine and never
	// blocks.
	TooLong func(TooLongError)
}

// Stream is a bidirectional message stream to one server, as a Transport
// opened it: JSON-RPC messages out in order, the server's messages in.
// The Conn is its only user. Send, Cancel, Close, Done and Err may be
// called from any goroutine, Read from one at a time.
type Stream interface {
	// Read returns the next message the server sent, its bytes (one
	// JSON-RPC message, judged by the Conn with protocol.DecodeFromServer;
	// the caller owns them). A message over Options.MaxLineBytes is
	// dropped (and reported through Link.TooLong). An error is final
	// (io.EOF at the end of input): Read then returns it again.
	Read() ([]byte, error)
	// Send queues m for the server and never waits on it: what the server
	// does not take at once waits in the stream, in order. It reports
	// false, sending nothing, once the stream is closing; a request
	// queued when the stream starts closing is never sent, and m.Dropped
	// tells the Conn so.
	Send(m *Outgoing) bool
	// Cancel withdraws request m, which its caller gave up on. A request
	// not sent yet is never sent, and Cancel reports false: the server
	// knows nothing of it. One already sent is cancelled the transport's
	// way (over stdio, notifications/cancelled with reason), and Cancel
	// reports true.
	Cancel(m *Outgoing, reason string) (sent bool)
	// Close ends the connection gracefully (a child: its stdin closed,
	// then SIGTERM, then SIGKILL to its group, each after the transport's
	// grace; ctx ending skips to the last step) and returns once Done is
	// closed. It may be called more than once and concurrently.
	Close(ctx context.Context)
	// Done is closed once the connection has ended (the process reaped,
	// its pipes drained) and Read has returned its final error.
	Done() <-chan struct{}
	// Err says why the connection ended, once Done is closed (nil
	// before): for a Command, an *ExitError.
	Err() error
}

// Outgoing is one message for the server, as the Conn hands it to a
// Stream: a request, a notification, or the answer to a request of the
// server's.
type Outgoing struct {
	// Data is the message's JSON text, without a newline.
	Data []byte
	// ID is a request's id (the Conn's own: integers from 1), 0 for
	// anything else.
	ID int64
	// Method is a request's or a notification's method, "" for an
	// answer: what a transport that routes by method (an HTTP one: its
	// headers, its sessions) needs without decoding Data.
	Method string
	// Reply marks the answer to a request of the server's: it counts
	// against Options.MaxServerRequests until it is written.
	Reply bool
	// TraceParent and TraceState are a request's W3C trace context
	// (CallOptions.TraceParent), "" for none: an HTTP transport sends
	// them as the traceparent and tracestate headers.
	TraceParent, TraceState string

	call *call // the request's call, nil for anything else

	// Guarded by the stream (the stdio writer's mu).
	sent, withdrawn bool
}

// Dropped tells the Conn that the stream will never send m: it was
// queued when the stream started closing. The request's call fails with
// ErrClosed. A Stream calls it at most once per message.
func (m *Outgoing) Dropped() {
	if m.call != nil {
		m.call.fail(ErrClosed)
	}
}

// Fail tells the Conn that the stream could not deliver request m, or
// could not get its answer, for a reason of its own that leaves the stream
// usable (an HTTP status, an authorization the server refused): the
// request's call fails with err. Nothing happens for a message that is not
// a request, or whose call has ended. A Stream calls it at most once per
// message; it never blocks.
func (m *Outgoing) Fail(err error) {
	if m.call != nil {
		m.call.fail(err)
	}
}

// waitingSender is a Stream that can send a request on the caller's
// goroutine and read its answer there, returning once the request's own
// exchange is over (its answer delivered to the Conn, or the request
// failed, cancelled or left to another stream), or that sends it as Send
// does when it cannot. It calls queued once m is the stream's to cancel
// (Cancel finds it), before it sends m; false, without calling queued,
// once the stream is closing. Conn.Call uses it; Conn.abandon, on another
// goroutine, may cancel the request meanwhile.
type waitingSender interface {
	sendWait(m *Outgoing, queued func()) bool
}

// answer hands the Conn the response to request m, decoded, as its
// reader would: a transport that reads each request's answer on a
// goroutine of its own (HTTP) delivers it without a hop to the reader.
// It reports false for a message that is not a request of the Conn's.
func (m *Outgoing) answer(d protocol.Message) bool {
	if m.call == nil {
		return false
	}
	m.call.c.response(d)
	return true
}

// TooLongError reports a message over the limit, which was dropped (Link.
// TooLong): when the transport could tell which request it answered (the
// id of a response, found at either end of the line), HasID is set and
// the Conn fails that call with ErrResponseTooLong.
type TooLongError struct {
	ID    int64
	HasID bool
}

func (e *TooLongError) Error() string {
	if !e.HasID {
		return "a message exceeds the line limit"
	}
	return "the answer to request " + strconv.FormatInt(e.ID, 10) + " exceeds the line limit"
}

// cancelFrame is notifications/cancelled for request id, the stdio way of
// Stream.Cancel.
func cancelFrame(id int64, reason string) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"reason":`...)
	b = protocol.AppendString(b, reason)
	return append(b, "}}"...)
}

// noiseSink is a Stream that keeps what the server wrote that was not a
// JSON-RPC message (a banner, a log line on stdout): the Conn hands such
// lines back, and the stream logs them as the server's output.
type noiseSink interface{ noise(line []byte) }

// replyBacklog is a Stream that says how many answers to the server's
// requests wait in it unwritten: a server that does not read them must
// not make the Conn queue more (docs/upstreams.md §5).
type replyBacklog interface{ queuedReplies() int }

// pider is a Stream that is a process.
type pider interface{ PID() int }
