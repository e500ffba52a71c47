package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// A 2026 client on a legacy upstream (docs/upstreams.md §6): the upstream asks
// for elicitation or sampling in the middle of a call, as a request to its
// client; a 2026 client can only be asked by an input_required answer.
// snodod parks the upstream's request, answers the client's call
// input_required with a handle (random 128 bits, inside the signed
// requestState that binds it to the method and params digest), and the
// retry's answer goes back to the upstream; the call's result, or its next
// question, answers the retry. The call itself runs on, detached from the
// client's requests, within request_timeout. This is the one bounded
// exception to "no state between rounds": at most upstreams.max_parked
// parked calls per daemon, each for at most parkLifetime; on expiry or a
// client's cancel the upstream's request gets -32603 and its call a
// notifications/cancelled.

// parkLifetime is how long a parked call waits for the client's retry.
const parkLifetime = 10 * time.Minute

// parking holds the parked calls of a Manager.
type parking struct {
	m        *Manager
	mu       sync.Mutex
	byHandle map[string]*parkedCall
}

func newParking(m *Manager) *parking { return &parking{m: m, byHandle: map[string]*parkedCall{}} }

// parkedCall is a call of a 2026 client running on a legacy upstream.
type parkedCall struct {
	in     *instance
	o      *owner
	result chan callResult // the call's end, once
	cancel context.CancelFunc

	// Guarded by parking.mu while parked.
	handle  string
	pending *pendingInput
	timer   *time.Timer
}

type callResult struct {
	raw json.RawMessage
	err error
}

// pendingInput is an upstream request waiting for the client's answer:
// whoever answers it replies to r (resume, expire).
type pendingInput struct {
	method string
	params json.RawMessage
	r      *mcpclient.Request
}

// call starts the call detached from ctx and waits for its end or its
// first question. The call's place in the instance's gate is its
// goroutine's, given back when the call ends.
func (p *parking) call(ctx context.Context, in *instance, conn *mcpclient.Conn, o *owner, method string, params json.RawMessage, req *server.RawRequest) (*server.RawResult, error) {
	o.park = make(chan *pendingInput, 4)
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pc := &parkedCall{in: in, o: o, result: make(chan callResult, 1), cancel: cancel}
	go func() {
		defer cancel()
		defer in.gate.leave()
		raw, err := in.callOnce(bg, conn, o, method, params, req)
		pc.result <- callResult{raw, err}
	}()
	return p.wait(ctx, pc)
}

// wait answers the client's request with the call's end, or parks the
// call at its next question.
func (p *parking) wait(ctx context.Context, pc *parkedCall) (*server.RawResult, error) {
	select {
	case r := <-pc.result:
		var exit *mcpclient.ExitError
		switch {
		case r.err == nil:
			return &server.RawResult{Result: r.raw}, nil
		case errors.As(r.err, &exit):
			return nil, pc.in.exitedDuring(exit)
		}
		return nil, r.err
	case pi := <-pc.o.park:
		return p.parkAt(pc, pi)
	case <-ctx.Done():
		pc.cancel()
		return nil, ctx.Err()
	}
}

// parkAt registers pc under a new handle for its question pi and answers
// input_required.
func (p *parking) parkAt(pc *parkedCall, pi *pendingInput) (*server.RawResult, error) {
	var b [16]byte
	rand.Read(b[:])
	handle := hex.EncodeToString(b[:])
	p.mu.Lock()
	pc.handle, pc.pending = handle, pi
	p.byHandle[handle] = pc
	pc.timer = time.AfterFunc(parkLifetime, func() { p.expire(handle) })
	p.mu.Unlock()
	requests, _ := json.Marshal(map[string]any{"u1": map[string]any{"method": pi.method, "params": pi.params}})
	state, _ := json.Marshal(envelope{Upstream: pc.in.u.name, Park: handle})
	return &server.RawResult{InputRequests: requests, State: state}, nil
}

// park is the upstream's side: it hands the question to the call's owner,
// whose client answers it with a retry (resume), or nobody does (expire).
// It never waits.
func (p *parking) park(o *owner, r *mcpclient.Request, params json.RawMessage) {
	method := r.Method
	if o.park == nil {
		r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: " + method + " arrived outside a call that can ask its client"})
		return
	}
	if !declares(o.caps, method) {
		r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: the client of this call did not declare the capability %s needs (-32021)", method)})
		return
	}
	maxParked := p.m.limits.Load().MaxParked
	p.mu.Lock()
	full := len(p.byHandle) >= maxParked
	p.mu.Unlock()
	if full {
		r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: %d calls already wait for their clients' input (upstreams.max_parked); try again later", maxParked)})
		return
	}
	select {
	case o.park <- &pendingInput{method: method, params: params, r: r}:
	default:
		r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: too many questions at once for one call"})
	}
}

// resume takes a retry's answer to a parked call and waits for what comes
// next.
func (p *parking) resume(ctx context.Context, handle string, req *server.RawRequest) (*server.RawResult, error) {
	answer, ok := req.InputResponses["u1"]
	p.mu.Lock()
	pc := p.byHandle[handle]
	if pc != nil && ok {
		delete(p.byHandle, handle)
		pc.timer.Stop()
	}
	p.mu.Unlock()
	switch {
	case pc == nil:
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid requestState: the parked call expired or was answered already"}
	case !ok:
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "inputResponses must answer u1"}
	}
	// The retry only waits on the parked call, which upstreams.max_parked
	// and the gate bound (docs/transport.md §13.7).
	executor.Detach(ctx)
	pc.pending.r.Reply(answer, nil)
	pc.pending = nil
	return p.wait(ctx, pc)
}

// expire ends a parked call nobody retried: the upstream's question gets
// -32603 and the call is cancelled.
func (p *parking) expire(handle string) {
	p.mu.Lock()
	pc := p.byHandle[handle]
	delete(p.byHandle, handle)
	p.mu.Unlock()
	if pc == nil {
		return
	}
	pc.pending.r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError,
		Message: "snodod: the client did not answer within " + shortDuration(parkLifetime)})
	pc.cancel()
}

// parked returns the number of parked calls.
func (p *parking) parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byHandle)
}

// declares reports whether a 2026 client's capabilities allow method.
func declares(caps json.RawMessage, method string) bool {
	m, _ := protocol.Members(caps)
	switch method {
	case "elicitation/create":
		_, ok := m["elicitation"]
		return ok
	case "sampling/createMessage":
		_, ok := m["sampling"]
		return ok
	}
	return false
}
