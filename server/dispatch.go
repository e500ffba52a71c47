package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/snodod/snodod/protocol"
)

// HeaderProtocolVersion is the request header that names a legacy session's
// negotiated version. Over stdio the transport injects it after a successful
// initialize (docs/transport.md §14), so both transports select dialects alike.
const HeaderProtocolVersion = "Mcp-Protocol-Version"

// Request is one admitted request as a transport hands it to a Dispatcher.
// Handlers must not modify it.
type Request struct {
	ID     protocol.ID
	Method string
	// Params is the raw params object, or nil when absent.
	Params json.RawMessage
	// Split, when set, is Params as the transport's decoder split them
	// (protocol.Message's Split), so that the runtime does not split them
	// again; nil makes Dispatch split Params itself.
	Split *protocol.Split
	// Header carries the request headers, keys in canonical form (as
	// http.Header.Set and net/http make them): over stdio only
	// Mcp-Protocol-Version, set for a legacy request once a version is
	// negotiated and never for a 2026-era request.
	Header http.Header
	// State is the connection's state. A nil State serves the request
	// as if on a fresh connection.
	State *SessionState
	// Admission, when set, is what AdmitModern found of a 2026-era
	// request before the transport submitted it (HTTP's, which answers
	// its refusals before dispatch), so that Dispatch does not run
	// docs/protocol.md §5.2 steps 2 to 8 again; nil makes Dispatch run
	// them.
	Admission *Admission
}

// RequestFrom is the request a transport hands to Dispatch for msg, a
// decoded request: its id, method and params, with the decoder's split of
// them copied into split, which the transport keeps in its per-request
// state for as long as the request, so that the runtime splits nothing
// again (docs/architecture.md §4.5). Every transport builds its requests
// here; State and Header are the transport's to set.
func RequestFrom(msg *protocol.Message, split *protocol.Split) Request {
	*split = msg.Split
	return Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: split}
}

// Outcome is what dispatching a request produced. Exactly one of Result, Err
// and Stream is meaningful: Err when non-nil, else Stream when non-nil, else
// Result (which must encode as a JSON object).
type Outcome struct {
	Result any
	Err    *protocol.Error
	Stream Stream
}

// Stream is an open subscriptions/listen stream (docs/protocol.md §9). The
// transport owns it once it is returned: it writes Ack first, then each event
// Next returns, one at a time, and ends it with exactly one call to Close.
type Stream interface {
	// Ack returns the params of the notifications/subscriptions/acknowledged
	// line.
	Ack() any
	// Next blocks until the source has the next event or ends, or ctx ends.
	// A non-nil error means the source failed. The transport calls Next
	// again only after the previous event was written (docs/protocol.md §9.4).
	Next(ctx context.Context) (Event, error)
	// Close tells the source why the stream ended. It is called once.
	Close(reason CloseReason, detail string)
}

// Event is one outbound notification of a stream, or its graceful end.
type Event struct {
	Method string
	Params any
	// Done marks the graceful end of the source; Final is then the result
	// written with the listen id.
	Done  bool
	Final any
}

// CloseReason says why a stream ended, for its source.
type CloseReason uint8

const (
	// Disconnected: EOF, or a write failure after the acknowledgement.
	Disconnected CloseReason = iota
	// Cancelled: the client cancelled the listen; detail holds its reason.
	Cancelled
	// OutputFailed: writing the stream's own acknowledgement failed.
	OutputFailed
	// ClosedByServer: shutdown or session restart.
	ClosedByServer
	// Completed: the source ended gracefully, or failed.
	Completed
	// Refused: the connection could not take the stream (subscription cap,
	// or input had already ended).
	Refused
)

// Dispatcher serves admitted requests. One Dispatcher is shared by every
// connection of a process, so its methods may be called concurrently.
type Dispatcher interface {
	// Initialize answers a legacy initialize inline (docs/transport.md §14). It
	// returns the result and the negotiated version, or an error that leaves
	// the connection's recorded version unchanged. It must not block.
	Initialize(sess *SessionState, params json.RawMessage) (result any, version string, err *protocol.Error)
	// Notify is told of every notification other than a cancellation,
	// inline and in arrival order. It must not block and never answers.
	Notify(sess *SessionState, method string, params json.RawMessage)
	// Dispatch serves one request in an executor worker. ctx ends when the
	// request is cancelled, times out or its connection ends. A panic is
	// recovered by the executor and answered "Request worker failed".
	Dispatch(ctx context.Context, req *Request) Outcome
	// DispatchInline serves req at once, without the executor, when its
	// method is one the dispatcher answers without ever blocking, and
	// otherwise reports false having done nothing (docs/architecture.md
	// §4.1: where the hop to a worker and back costs more than the work).
	// A transport calls it on its own goroutine for each admitted request
	// first, and submits the request to the executor only when it
	// reports false; such a request never takes an executor slot, so it
	// is answered even when the executor is full. It must not block: it
	// runs on the connection's coordinator. ctx carries the transport's
	// values. A dispatcher that serves nothing inline reports false; one
	// that wraps another's Dispatch for some methods must wrap its
	// DispatchInline for them too.
	DispatchInline(ctx context.Context, req *Request) (Outcome, bool)
}
