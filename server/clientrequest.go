package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server/internal/ctxkey"
)

// This file holds requests from snodod to the client of a legacy request
// (docs/protocol.md §3.1, docs/transport.md §7.1): the ClientRequester a transport
// implements, and RequestClient, which handlers and relays call. Elicit,
// Sample and ListRoots use it in legacy eras and MRTR in 2026 (mrtr.go).
//
// Refinements of the contract in client-requests-api.md, same meaning:
//   - ErrInvalidClientResponse names what Elicit, Sample and ListRoots
//     return (wrapped) for a response that does not fit its request;
//   - the bookkeeping both transports need lives on SessionState (ids that
//     are never reused on the connection, the 16-outstanding cap), so the
//     stdio and HTTP transports share one rule;
//   - protocol.AppendRequest writes the request frame, and
//     protocol.Message carries a client response's id, result and error.

// MaxClientRequests is how many requests to one connection's client may be
// outstanding at once (docs/protocol.md §3.1); more wait in
// AcquireClientRequest.
const MaxClientRequests = 16

// ClientRequester sends requests to the client of one legacy request
// (docs/protocol.md §3.1). A transport puts one in the context of every legacy
// request it dispatches, bound to that request: what it sends belongs to
// that request and is cancelled with it.
type ClientRequester interface {
	// RequestClient sends method with params to the client and waits for
	// the response, at most until ctx ends (the originating request's
	// deadline or cancellation): then it sends notifications/cancelled for
	// it to the client and returns ctx's error. It returns the response's
	// result, or a *protocol.Error holding the client's error response. At
	// most MaxClientRequests are outstanding per connection; more wait
	// here. Ids are "snodod:<n>", never reused on the connection. When the
	// connection or its transport instance ends first (EOF, a write
	// failure, shutdown, a restart), it returns an error at once: it never
	// hangs. Safe for concurrent use by one request's goroutines.
	RequestClient(ctx context.Context, method string, params any) (json.RawMessage, error)
}

type clientRequesterKey = ctxkey.Requester

// WithClientRequester returns a context whose legacy handler sends its
// requests to the client through r.
func WithClientRequester(ctx context.Context, r ClientRequester) context.Context {
	return context.WithValue(ctx, clientRequesterKey{}, r)
}

// ErrMissingClientCapability is wrapped by RequestClient (and so by Elicit,
// Sample and ListRoots in legacy eras) when the client did not declare the
// capability the request needs: nothing was sent. The error also wraps a
// *protocol.Error shaped as -32021 "Missing required client capability"
// with data.requiredCapabilities (docs/protocol.md §12.2), for errors.As (a
// relay to a 2026 client). A tools/call, prompts/get or resources/read
// handler that returns it is answered -32603 "Client does not support
// <method>" (docs/protocol.md §14.2 case 9).
var ErrMissingClientCapability = errors.New("missing required client capability")

// ErrInvalidClientResponse is wrapped by Elicit, Sample and ListRoots in
// legacy eras when the client's response does not fit its request
// (docs/protocol.md §3.1: elicitation action and content against the requested
// schema; sampling role, content and model; roots a list of uris). It is
// the handler's error.
var ErrInvalidClientResponse = errors.New("invalid response from the client")

// missingCapabilityError is what RequestClient returns for an undeclared
// capability: errors.Is finds ErrMissingClientCapability, errors.As the
// -32021-shaped *protocol.Error.
type missingCapabilityError struct {
	method string
	reply  *protocol.Error
}

func (e *missingCapabilityError) Error() string {
	return e.method + ": " + e.reply.Message
}

func (e *missingCapabilityError) Unwrap() []error {
	return []error{ErrMissingClientCapability, e.reply}
}

// legacyCall is what the runtime puts in a legacy handler's context: the
// session (its client capabilities, its log threshold) and the transport's
// request notifier, for Log and RequestClient. One value, one allocation.
type legacyCall struct {
	sess     *SessionState
	notifier Notifier
}

// legacyKey finds a legacy request's legacyCall in its context (the
// runtime's callContext answers it), so that Log and RequestClient can
// reach its client.
type legacyKey struct{}

// RequestClient is what handlers and relays call to send a request to the
// client: in a legacy request, after checking that the client declared the
// capability the method needs (elicitation/create: elicitation, or
// elicitation.url for mode "url"; sampling/createMessage: sampling, or
// sampling.tools with tools; roots/list: roots; any other method, such as
// ping: nothing), it sends through the context's ClientRequester. A missing
// capability is an error wrapping ErrMissingClientCapability, and nothing
// is sent. In a 2026 request, or without a requester (a transport that
// cannot carry requests to its client), it returns an error the runtime
// answers -32603 "Input requests are not supported in this protocol
// version" when a handler returns it; 2026 handlers use MRTR through
// Elicit, Sample and ListRoots.
//
// params is encoded as JSON (a json.RawMessage is sent as it is). The
// result is the client's result object, or the error is a *protocol.Error
// holding the client's error response, ctx's error, or the transport's.
func RequestClient(ctx context.Context, method string, params any) (json.RawMessage, error) {
	lc, _ := ctx.Value(legacyKey{}).(*legacyCall)
	r, _ := ctx.Value(clientRequesterKey{}).(ClientRequester)
	if lc == nil || r == nil {
		return nil, fmt.Errorf("%s: %w", method, errInputUnsupported)
	}
	return requestClient(ctx, r, lc.sess, method, params)
}

// requestClient checks the capability method needs against those ss's
// client declared, then sends through r.
func requestClient(ctx context.Context, r ClientRequester, ss *SessionState, method string, params any) (json.RawMessage, error) {
	asked := map[string]InputRequest{"": {Method: method, Params: params}}
	if missing := missingCapabilities(asked, ss.clientCaps()); missing != nil {
		return nil, &missingCapabilityError{method: method, reply: missingCapabilityReply(missing)}
	}
	return r.RequestClient(ctx, method, params)
}

// RequestClientBefore is RequestClient for a legacy request that a
// Dispatcher wrapping the runtime has not dispatched yet (the upstream
// manager asks for a login before the tool a call names is known,
// docs/upstreams.md §9): ss is the request's connection, whose client's
// initialize declared the capabilities checked. Outside a legacy session
// (before initialize, a 2026 client) or without a requester in ctx it
// returns the error RequestClient returns there.
func RequestClientBefore(ctx context.Context, ss *SessionState, method string, params any) (json.RawMessage, error) {
	r, _ := ctx.Value(clientRequesterKey{}).(ClientRequester)
	if ss == nil || r == nil || !ss.Legacy() {
		return nil, fmt.Errorf("%s: %w", method, errInputUnsupported)
	}
	return requestClient(ctx, r, ss, method, params)
}

// NextClientRequestID returns the id of the next request to this
// connection's client: "snodod:<n>", n counting from 1. The count lives in
// the state, so a restarted session never reuses an id on its connection.
func (ss *SessionState) NextClientRequestID() protocol.ID {
	n := ss.clientIDs.Add(1)
	return protocol.StringID("snodod:" + strconv.FormatUint(n, 10))
}

// AcquireClientRequest takes one of the connection's MaxClientRequests
// places for a request to its client, waiting while all are taken, at most
// until ctx ends (it then returns ctx's error). ReleaseClientRequest gives
// the place back once the request is answered or abandoned.
func (ss *SessionState) AcquireClientRequest(ctx context.Context) error {
	ss.mu.Lock()
	if ss.clientSlots == nil {
		ss.clientSlots = make(chan struct{}, MaxClientRequests)
	}
	slots := ss.clientSlots
	ss.mu.Unlock()
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReleaseClientRequest gives back a place taken by AcquireClientRequest.
func (ss *SessionState) ReleaseClientRequest() {
	ss.mu.Lock()
	slots := ss.clientSlots
	ss.mu.Unlock()
	<-slots
}
