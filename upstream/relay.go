package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/tracing"
)

// maxInputRounds bounds the input_required rounds snodod plays for a
// legacy client on a 2026 upstream (docs/upstreams.md §6).
const maxInputRounds = 10

// owner is who one relayed call is for: the CallOptions.Owner the Conn
// hands back with the upstream's own requests, and the key of log
// attribution (docs/upstreams.md §5).
type owner struct {
	client   *Client
	ctx      context.Context // the client's request: its progress, log, RequestClient
	modern   bool
	caps     json.RawMessage
	logLevel string
	// park receives a legacy upstream's elicitation or sampling during
	// the call of a 2026 client (park.go); nil otherwise.
	park chan *pendingInput
}

// envelope is the state snodod signs into a relayed requestState (the
// runtime binds it to the method and params): which upstream, and the
// upstream's own requestState or a parked call's handle.
type envelope struct {
	Upstream string `json:"u"`
	Inner    string `json:"s,omitempty"`
	Park     string `json:"p,omitempty"`
	// Resend makes the retry the original call again, after the URL
	// elicitations of a -32042 (urlelicit.go).
	Resend bool `json:"r,omitempty"`
	// Login is the elicitationId of the login the retry waits for before
	// it re-sends the call (loginelicit.go).
	Login string `json:"l,omitempty"`
}

var errInvalidState = &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid requestState"}

// handler relays method for upstream name; orig is the item's name on the
// upstream (a tool, a prompt), "" for a resource.
func (m *Manager) handler(name, method, orig string) server.RawHandler {
	return func(ctx context.Context, req *server.RawRequest) (*server.RawResult, error) {
		u := m.upstream(name)
		if u == nil {
			return nil, &protocol.Error{Code: CodeUnavailable, Message: fmt.Sprintf("snodod: upstream %q is no longer configured", name),
				Data: Detail{Name: name, State: string(StateStopped)}}
		}
		res, err := u.relay(ctx, req, method, orig)
		var f *failure
		if errors.As(err, &f) {
			if method == "tools/call" && !f.asError {
				return &server.RawResult{Result: f.toolResult()}, nil
			}
			return nil, f.rpcError()
		}
		return res, err
	}
}

// relay serves one relayed request: the client's instance, the upstream's
// own names, a 2026 retry's state, then the call.
func (u *upstream) relay(ctx context.Context, req *server.RawRequest, method, orig string) (*server.RawResult, error) {
	cfg := u.conf()
	executor.ExtendDeadline(ctx, relayDeadline(cfg))
	c := u.m.clientOf(req.Caller)
	if c != nil {
		c.markUsed(u.name)
	}
	in, err := u.instanceFor(c)
	if errors.Is(err, errStopped) {
		return nil, replacedFailure(u.name)
	}
	if err != nil {
		return nil, err
	}
	params := req.Params
	if method == "tools/call" && argumentsAbsent(params) {
		// Absent arguments are {} to snodod (docs/protocol.md §6.3), and
		// servers validating with a schema refuse an absent object (or
		// the null some clients send for none).
		params = withMember(params, "arguments", json.RawMessage("{}"))
	}
	if orig != "" && (orig != req.Name || method == "completion/complete") {
		if method == "completion/complete" {
			params = withRefName(params, orig)
		} else {
			params = withMember(params, "name", orig)
		}
	}
	if req.State != nil {
		var st envelope
		if json.Unmarshal(req.State, &st) != nil || st.Upstream != u.name {
			return nil, errInvalidState
		}
		switch {
		case st.Park != "":
			res, err := u.m.parks.resume(ctx, st.Park, req)
			return u.urlElicitation(req, method, res, err)
		case st.Resend:
			if st.Login != "" {
				if err := u.loginRetried(ctx, req, st.Login); err != nil {
					return nil, err
				}
			}
			params = resent(params) // after a URL elicitation (urlelicit.go, loginelicit.go)
		default:
			params = withMember(params, "requestState", st.Inner)
		}
	}
	o := &owner{client: c, ctx: ctx, modern: req.Modern, caps: req.ClientCapabilities, logLevel: req.LogLevel}
	res, err := u.call(ctx, in, o, method, params, req)
	// The client is asked to open the login's URL (loginelicit.go), again
	// when the call then needs more (a step-up), at most maxLogins times.
	for range maxLogins {
		if !needsLogin(err) || c == nil || !c.MayLogIn || !declaresURLElicitation(req.ClientCapabilities) {
			break
		}
		if req.Modern {
			return u.loginThrough2026(ctx, method, err)
		}
		if err = u.loginThroughLegacy(ctx, err, server.RequestClient); err != nil {
			break
		}
		res, err = u.call(ctx, in, o, method, params, req)
	}
	return u.urlElicitation(req, method, res, err)
}

// relayDeadline is the executor deadline of a relayed request
// (docs/upstreams.md, "chose differently" 4): a start, then the call.
func relayDeadline(cfg *config.Upstream) time.Duration {
	return cfg.StartTimeout + cfg.RequestTimeout + 5*time.Second
}

// replacedFailure is the failure of a request whose instance is gone: its
// upstream was replaced or removed by a reload, or its session ended.
func replacedFailure(name string) *failure {
	return &failure{code: CodeUnavailable, message: fmt.Sprintf("snodod: upstream %q is being replaced or its session ended; try again", name),
		detail: Detail{Name: name, State: string(StateDraining)}}
}

// sideEffectFree methods are retried once on the restarted instance when
// the process exits during them (docs/upstreams.md §4).
func sideEffectFree(method string) bool {
	switch method {
	case "resources/read", "prompts/get", "completion/complete", "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		return true
	}
	return false
}

// mayAskInput are the methods an input_required may answer (docs/protocol.md §12.1).
func mayAskInput(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

// call relays to a running instance, with the one retry of a
// side-effect-free request and the era bridges of docs/upstreams.md §6. The
// request holds a place in the instance's gate from before the instance
// is acquired (a start) to its end, every retry and input round included;
// a parked call's goroutine takes the place over.
func (u *upstream) call(ctx context.Context, in *instance, o *owner, method string, params json.RawMessage, req *server.RawRequest) (*server.RawResult, error) {
	if err := in.enter(ctx, o); err != nil {
		return nil, err
	}
	parked := false
	defer func() {
		if !parked {
			in.gate.leave()
		}
	}()
	cfg := u.conf()
	for attempt := 0; ; attempt++ {
		// A call right after a crash waits for the scheduled restart
		// (at most restart.max_delay away) when it is due within the
		// call's request_timeout; the retry waits for it however far it
		// is (docs/upstreams.md §4).
		backoff := cfg.RequestTimeout
		if attempt > 0 {
			backoff = forever
		}
		conn, waited, err := in.acquire(ctx, backoff)
		if errors.Is(err, errStopped) {
			return nil, replacedFailure(u.name)
		}
		if err != nil {
			return nil, err
		}
		if waited {
			// The wait for a start or a restart used part of the deadline
			// relay set; renewed whole, it never shrinks, and the call
			// still gets its request_timeout.
			executor.ExtendDeadline(ctx, relayDeadline(cfg))
		}
		if o.modern && conn.Era() == mcpclient.EraLegacy && mayAskInput(method) {
			parked = true
			return u.m.parks.call(ctx, in, conn, o, method, params, req)
		}
		raw, err := in.callOnce(ctx, conn, o, method, params, req)
		var exit *mcpclient.ExitError
		ended := errors.As(err, &exit) || errors.Is(err, mcpclient.ErrClosed)
		if ended && attempt == 0 {
			// The supervision loop takes the end of the process once it is
			// reaped: wait for that, so the retry finds the next one.
			select {
			case <-conn.Done():
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(in.u.m.stopGrace()):
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, mcpclient.ErrClosed) && attempt == 0:
			continue // it was stopping and got nothing: the next instance serves
		case exit != nil && sideEffectFree(method) && attempt == 0:
			continue
		case errors.As(err, &exit) || errors.Is(err, mcpclient.ErrClosed):
			return nil, in.exitedDuring(exit)
		default:
			return nil, err
		}
		if conn.Era() == mcpclient.Era2026 {
			return u.inputRounds(ctx, in, conn, o, method, params, req, raw)
		}
		return &server.RawResult{Result: raw}, nil
	}
}

// clientError is what a failed request to the client becomes for the
// client's own call: its error response, or -32603 saying why.
func clientError(err error) error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr
	}
	return &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: the upstream needs input the client could not give: " + err.Error()}
}

// enter takes the request's place in the instance's gate, or fails it
// -31003 when the gate's queue is full. Once admitted the request waits on
// the upstream alone, bounded by the gate, so it gives its executor slot
// back (docs/transport.md §13.7). A nil error must be paired with gate.leave.
func (in *instance) enter(ctx context.Context, o *owner) error {
	ok, err := in.gate.enter(ctx, o.client, func() { executor.Detach(ctx) })
	if err != nil {
		return err
	}
	if !ok {
		inFlight, queued := in.gate.load()
		f := in.failureNow(CodeOverloaded, fmt.Sprintf("snodod: upstream %q is overloaded: %d requests in flight and %d queued (upstreams.max_in_flight, upstreams.max_queued); try again later",
			in.u.name, inFlight, queued))
		f.asError = true
		return f
	}
	return nil
}

// callOnce sends one request to conn within request_timeout, with the
// client's progress forwarded; the caller holds a place in the gate.
func (in *instance) callOnce(ctx context.Context, conn *mcpclient.Conn, o *owner, method string, params json.RawMessage, req *server.RawRequest) (raw json.RawMessage, err error) {
	in.begin(o)
	defer in.end(o)
	opts := mcpclient.CallOptions{Owner: o, ClientCapabilities: req.ClientCapabilities, ClientInfo: req.ClientInfo}
	if tracing.Active(ctx) {
		// The upstream's span, the parent the upstream is handed
		// (docs/observability.md, "Traces").
		var span *tracing.Span
		ctx, span = tracing.StartUpstream(ctx, in.u.name, method, relayTarget(method, params))
		defer func() { span.End(err) }()
		opts.TraceParent, opts.TraceState = tracing.Parent(ctx)
	}
	timeout := in.u.conf().RequestTimeout
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if req.ProgressToken != nil {
		fwd := newForwarder(ctx)
		defer fwd.stop()
		opts.Progress = fwd.push
	}
	raw, err = conn.Call(callCtx, method, params, opts)
	var perr *protocol.Error
	switch {
	case err == nil:
		return raw, nil
	case errors.As(err, &perr):
		if perr.Code == protocol.CodeResourceNotFound && req.Modern {
			return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: perr.Message, Data: perr.Data}
		}
		return nil, perr
	case errors.As(err, new(*mcpclient.RemoteError)):
		return nil, in.remoteFailure(err)
	case errors.Is(err, mcpclient.ErrResponseTooLong):
		f := in.failureNow(CodeTooLong, fmt.Sprintf("snodod: upstream %q answered with a line over the %d-byte limit (session.max_line_bytes); the answer was dropped",
			in.u.name, in.u.m.opts.MaxLineBytes))
		f.asError = true
		return nil, f
	case errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, in.failureNow(CodeUnavailable, fmt.Sprintf("snodod: upstream %q did not answer within %s; the call was cancelled", in.u.name, shortDuration(timeout)))
	}
	return nil, err
}

// relayTarget is the name a relayed tools/call or prompts/get has on the
// upstream, for its span; "" for any other method.
func relayTarget(method string, params json.RawMessage) string {
	if method != "tools/call" && method != "prompts/get" {
		return ""
	}
	m, _ := protocol.Members(params)
	name, _ := protocol.String(m["name"])
	return name
}

// exitedDuring is the failure of a call whose process ended under it.
func (in *instance) exitedDuring(exit *mcpclient.ExitError) *failure {
	return in.failureNow(CodeUnavailable, fmt.Sprintf("snodod: upstream %q exited (%s) while this call was running; it may have partly run", in.u.name, exitWords(exit)))
}

// withMember returns the params object with member name set to v (a
// json.RawMessage written as it is), spliced, never re-encoded whole.
func withMember(params json.RawMessage, name string, v any) json.RawMessage {
	var raw json.RawMessage
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case string:
		raw = protocol.AppendString(nil, x)
	default:
		var err error
		if raw, err = protocol.AppendValue(nil, v); err != nil {
			return params
		}
	}
	return protocol.SetMember(params, name, raw)
}

// withRefName sets a completion's ref.name (a prompt's name on the
// upstream); a resource reference is left as it is.
func withRefName(params json.RawMessage, name string) json.RawMessage {
	m, _ := protocol.Members(params)
	ref, _ := protocol.Members(m["ref"])
	if t, _ := protocol.String(ref["type"]); t != "ref/prompt" {
		return params
	}
	return withMember(params, "ref", protocol.SetMember(m["ref"], "name", protocol.AppendString(nil, name)))
}

// argumentsAbsent reports whether a tools/call's params lack arguments,
// or carry null, without decoding them.
func argumentsAbsent(params json.RawMessage) bool {
	absent := true
	protocol.EachMember(params, func(name, value json.RawMessage) bool {
		if string(name) == `"arguments"` {
			absent = string(value) == "null"
			return false
		}
		return true
	})
	return absent
}

// forwarder passes an upstream's progress to the client without blocking
// the Conn's reader: it keeps the newest report and writes it from its own
// goroutine, so a slow client loses intermediate reports, never the order.
type forwarder struct {
	ctx     context.Context
	mu      sync.Mutex
	latest  json.RawMessage
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

func newForwarder(ctx context.Context) *forwarder {
	f := &forwarder{ctx: ctx, wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go f.run()
	return f
}

func (f *forwarder) push(params json.RawMessage) {
	f.mu.Lock()
	f.latest = params
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *forwarder) run() {
	defer close(f.stopped)
	for {
		select {
		case <-f.done:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		raw := f.latest
		f.latest = nil
		f.mu.Unlock()
		var p struct {
			Progress float64  `json:"progress"`
			Total    *float64 `json:"total"`
			Message  string   `json:"message"`
		}
		if raw == nil || json.Unmarshal(raw, &p) != nil {
			continue
		}
		report := server.Progress{Progress: p.Progress, Message: p.Message}
		if p.Total != nil {
			report.Total, report.HasTotal = *p.Total, true
		}
		_ = server.ReportProgress(f.ctx, report)
	}
}

// stop ends the forwarder before the call's answer goes out: nothing is
// reported after it.
func (f *forwarder) stop() {
	close(f.done)
	<-f.stopped
}
