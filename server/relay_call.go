package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"unicode/utf8"

	"github.com/snodod/snodod/protocol"
)

// relay serves a request for a relayed item with its handler h (relay.go);
// name is the item's listed name, or the URI read.
func (c *call) relay(ctx context.Context, h RawHandler, name string) Outcome {
	req := &RawRequest{Method: c.req.Method, Name: name, Params: c.req.Params, Version: c.version, Modern: c.modern,
		ClientCapabilities: c.clientCaps()}
	if c.modern {
		req.ClientInfo, req.LogLevel, req.ProgressToken = c.meta.ClientInfo, c.meta.LogLevel, c.meta.ProgressToken
		responses, state, perr := decodeRetry(c.params)
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
		meta, _ := members(c.params["_meta"])
		req.ProgressToken = meta["progressToken"]
	}
	res, err := c.runRelay(ctx, h, req)
	var perr *protocol.Error
	switch {
	case errors.As(err, &perr):
		return errOutcome(perr)
	case err != nil:
		c.s.log.Error("relayed request failed", "method", c.req.Method, "name", name, "err", err)
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
// and only for the methods that may ask, protocol.md §12.1).
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

// Members of results that belong to one era (protocol.md §5.3).
var eraMembers = [][]byte{[]byte(`"resultType"`), []byte(`"ttlMs"`), []byte(`"cacheScope"`), []byte(protocol.MetaServerInfo)}

// shapeRelayed shapes another server's result object for the client's era
// (upstreams.md §6): for 2026, resultType "complete" when absent, the
// serverInfo _meta member the runtime's, and for a read the cache fields
// when absent; for legacy eras resultType, ttlMs, cacheScope and that
// member removed, and a tool's structuredContent kept only when it is an
// object. ok is false when raw is not an object.
func (c *call) shapeRelayed(raw json.RawMessage) (json.RawMessage, bool) {
	if !c.modern && !bytes.Contains(raw, []byte(`"structuredContent"`)) && !containsAny(raw, eraMembers) {
		return raw, isJSONObject(raw) // nothing to remove: as sent
	}
	m, ok := protocol.Members(raw)
	if !ok || m == nil {
		return nil, ok && m != nil
	}
	meta, _ := protocol.Members(m["_meta"])
	delete(meta, protocol.MetaServerInfo)
	if c.modern {
		if _, ok := m["resultType"]; !ok {
			m["resultType"] = json.RawMessage(`"complete"`)
		}
		if c.req.Method == "resources/read" {
			if _, ok := m["ttlMs"]; !ok {
				m["ttlMs"], _ = protocol.AppendValue(nil, c.s.opts.CacheTTL.Milliseconds())
			}
			if _, ok := m["cacheScope"]; !ok {
				m["cacheScope"], _ = protocol.AppendValue(nil, c.s.opts.CacheScope)
			}
		}
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[protocol.MetaServerInfo], _ = protocol.AppendValue(nil, c.s.serverInfo(c.version))
	} else {
		delete(m, "resultType")
		delete(m, "ttlMs")
		delete(m, "cacheScope")
		if sc, ok := m["structuredContent"]; ok && c.req.Method == "tools/call" && !isJSONObject(sc) {
			delete(m, "structuredContent")
		}
	}
	if meta != nil || m["_meta"] != nil {
		if len(meta) == 0 {
			delete(m, "_meta")
		} else {
			m["_meta"], _ = protocol.AppendValue(nil, meta)
		}
	}
	out, err := protocol.AppendValue(nil, m)
	return out, err == nil
}

func containsAny(b []byte, subs [][]byte) bool {
	for _, s := range subs {
		if bytes.Contains(b, s) {
			return true
		}
	}
	return false
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
