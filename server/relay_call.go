package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/snodod/snodod/protocol"
)

// relay serves a request for a relayed item with its handler h (relay.go);
// name is the item's listed name, or the URI read.
func (c *call) relay(ctx context.Context, h RawHandler, name string) Outcome {
	req := &RawRequest{Caller: c.sess.Caller(), Method: c.req.Method, Name: name, Params: c.req.Params, Version: c.version, Modern: c.modern,
		ClientCapabilities: c.clientCaps()}
	if c.modern {
		req.ClientInfo, req.LogLevel, req.ProgressToken = c.meta.ClientInfo, c.meta.LogLevel, c.meta.ProgressToken
		responses, state, perr := decodeRetry(c.split.Members)
		if perr != nil {
			return errOutcome(perr)
		}
		if state != nil {
			own, ok := c.s.signer.openRelayState(*state, c.req.Method, c.req.Params, now())
			if !ok {
				return invalidParams("Invalid requestState")
			}
			req.State = own
		}
		req.InputResponses = responses
	} else {
		req.ProgressToken = c.split.Meta.Value("progressToken")
	}
	start := time.Now()
	res, err := c.runRelay(ctx, h, req)
	c.relayed, c.relayTime = true, time.Since(start)
	var perr *protocol.Error
	switch {
	case errors.As(err, &perr):
		return errOutcome(perr)
	case err != nil:
		c.logFailure(ctx, err, "relayed request failed", "method", c.req.Method, "name", name)
		return errOutcome(errInternal)
	case res == nil || res.Result == nil && res.InputRequests == nil:
		return errOutcome(protocol.ErrInvalidResult)
	case res.InputRequests != nil:
		return c.relayInputRequired(res)
	}
	shaped, ok := c.shapeRelayed(res.Result)
	if !ok {
		c.s.log.Error("relayed result is not a JSON object", "method", c.req.Method, "name", name)
		return errOutcome(protocol.ErrInvalidResult)
	}
	return Outcome{Result: rawObject(shaped)}
}

// logFailure logs a handler's failure at ERROR, unless it is the end of a
// request its client cancelled (notifications/cancelled, a closed
// connection): that is normal, and nothing is written for it, so it is
// logged at debug ("… cancelled by its client").
func (c *call) logFailure(ctx context.Context, err error, msg string, args ...any) {
	if errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled) {
		c.s.log.Debug(strings.TrimSuffix(msg, " failed")+" cancelled by its client", args...)
		return
	}
	c.s.log.Error(msg, append(args, "err", err)...)
}

// runRelay calls h, recovering a panic as the runtime does for tools.
func (c *call) runRelay(ctx context.Context, h RawHandler, req *RawRequest) (res *RawResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.s.log.Error("relay handler panicked", "method", req.Method, "name", req.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, err = nil, protocol.ErrWorkerFailed
		}
	}()
	return h(ctx, req)
}

// relayInputRequired answers a round that needs client input (2026 only,
// and only for the methods that may ask, docs/protocol.md §12.1).
func (c *call) relayInputRequired(res *RawResult) Outcome {
	switch c.req.Method {
	case "tools/call", "prompts/get", "resources/read":
	default:
		return errOutcome(errInternal)
	}
	if !c.modern || !isJSONObject(res.InputRequests) {
		return errOutcome(errInputNotSupported)
	}
	type inputRequiredResult struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  string          `json:"requestState"`
		Meta          any             `json:"_meta"`
	}
	return Outcome{Result: inputRequiredResult{
		ResultType:    "input_required",
		InputRequests: res.InputRequests,
		RequestState:  c.s.signer.relayState(c.req.Method, c.req.Params, res.State, now()),
		Meta:          c.resultMeta(nil),
	}}
}

// shapeRelayed shapes another server's result object for the client's era
// (docs/upstreams.md §6): for 2026, resultType "complete" when absent, the
// serverInfo _meta member the runtime's, and for a read the cache fields
// when absent; for legacy eras resultType, ttlMs, cacheScope and that
// member removed, and a tool's structuredContent kept only when it is an
// object. ok is false when raw is not an object. The object is spliced,
// member order kept, values never decoded: a result that needs no change
// is returned as it is.
func (c *call) shapeRelayed(raw json.RawMessage) (json.RawMessage, bool) {
	if !c.modern {
		// The common legacy case, a result of the era it is relayed to,
		// is checked without allocating, and passed on as it is.
		plain := true
		if !protocol.EachMember(raw, func(name, value json.RawMessage) bool {
			switch string(name) {
			case `"resultType"`, `"ttlMs"`, `"cacheScope"`:
				plain = false
			case `"structuredContent"`:
				plain = plain && (c.req.Method != "tools/call" || isJSONObject(value))
			case `"_meta"`:
				plain = plain && !bytes.Contains(value, []byte(protocol.MetaServerInfo))
			}
			return plain
		}) {
			return nil, false
		}
		if plain {
			return raw, true
		}
	}
	out := make([]byte, 0, len(raw)+128)
	changed, hasType, hasTTL, hasScope := false, false, false, false
	var meta json.RawMessage
	ok := protocol.EachMember(raw, func(name, value json.RawMessage) bool {
		drop := false
		switch string(name) {
		case `"resultType"`:
			hasType, drop = true, !c.modern
		case `"ttlMs"`:
			hasTTL, drop = true, !c.modern
		case `"cacheScope"`:
			hasScope, drop = true, !c.modern
		case `"structuredContent"`:
			drop = !c.modern && c.req.Method == "tools/call" && !isJSONObject(value)
		case `"_meta"`:
			meta, drop = value, true // rewritten at the end
		}
		changed = changed || drop
		if !drop {
			out = protocol.AppendMember(out, name, value)
		}
		return true
	})
	if !ok {
		return nil, false
	}
	var shapedMeta json.RawMessage
	if c.modern {
		info, known := c.s.identity().infoJSON[c.version]
		if !known { // as resultMeta: encoded now for a version not enabled
			info, _ = protocol.AppendValue(nil, c.s.serverInfo(c.version))
		}
		shapedMeta = protocol.SetMember(meta, protocol.MetaServerInfo, info)
		if !hasType {
			out = protocol.AppendMember(out, json.RawMessage(`"resultType"`), json.RawMessage(`"complete"`))
		}
		if c.req.Method == "resources/read" {
			if !hasTTL {
				ttl, _ := protocol.AppendValue(nil, c.s.opts.CacheTTL.Milliseconds())
				out = protocol.AppendMember(out, json.RawMessage(`"ttlMs"`), ttl)
			}
			if !hasScope {
				scope, _ := protocol.AppendValue(nil, c.s.opts.CacheScope)
				out = protocol.AppendMember(out, json.RawMessage(`"cacheScope"`), scope)
			}
		}
		changed = true
	} else if meta != nil {
		shapedMeta = protocol.SetMember(meta, protocol.MetaServerInfo, nil)
		changed = changed || len(shapedMeta) != len(meta)
	}
	if !changed {
		return raw, true
	}
	if len(shapedMeta) > 2 { // not {}
		out = protocol.AppendMember(out, json.RawMessage(`"_meta"`), shapedMeta)
	}
	if len(out) == 0 {
		return json.RawMessage("{}"), true
	}
	out[0] = '{' // AppendMember wrote a leading comma
	return append(out, '}'), true
}

// rawObject is a result object already encoded; it is written as it is
// when it is plain (one line of valid UTF-8 without U+2028 or U+2029),
// else through the encoder, which compacts and sanitizes it.
type rawObject json.RawMessage

func (r rawObject) AppendJSON(dst []byte) ([]byte, error) {
	if utf8.Valid(r) && !bytes.ContainsAny(r, "\n\r\u2028\u2029") {
		return append(dst, r...), nil
	}
	return protocol.AppendValue(dst, json.RawMessage(r))
}
