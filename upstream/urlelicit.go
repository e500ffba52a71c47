package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// URL elicitation required (2025-11-25): a legacy upstream answers a request
// -32042 when the user must first open URLs (to sign in, to pay…), listed in
// data.elicitations as elicitation/create params of mode "url"; the client
// shows them and retries. 2026 has no such error (it MUST NOT be sent: the
// 2026-07-28 specification) but asks with input_required instead, so for a
// 2026 client snodod turns the error into input_required carrying those
// elicitations, and the retry re-sends the original call (docs/upstreams.md
// §6). A legacy client gets the error as it is. The upstream keeps whatever
// the user's visit gives it; only the URLs pass.

// CodeURLElicitationRequired is the legacy error of a request that needs
// the user to open URLs first (2025-11-25).
const CodeURLElicitationRequired = -32042

// urlElicitation shapes a call's -32042 for a 2026 client: input_required
// with one elicitation/create (mode "url") per listed elicitation, keyed
// url1, url2 …, and a state that makes the retry re-send the call. Any
// other outcome, and every outcome for a legacy client, is returned as it
// is.
func (u *upstream) urlElicitation(req *server.RawRequest, method string, res *server.RawResult, err error) (*server.RawResult, error) {
	var perr *protocol.Error
	if !req.Modern || !errors.As(err, &perr) || perr.Code != CodeURLElicitationRequired {
		return res, err
	}
	if !mayAskInput(method) {
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Data: perr.Data, Message: fmt.Sprintf(
			"snodod: upstream %q needs the user to open a URL first (URL elicitation), which a 2026 client can be asked only in tools/call, prompts/get or resources/read: %s",
			u.name, perr.Message)}
	}
	asks, ok := urlElicitations(perr.Data)
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Data: perr.Data, Message: fmt.Sprintf(
			"snodod: upstream %q answered -32042 (URL elicitation required) without elicitations to ask: %s", u.name, perr.Message)}
	}
	if !declaresURLElicitation(req.ClientCapabilities) {
		return nil, &protocol.Error{Code: protocol.CodeMissingCapability, Message: "Missing required client capability",
			Data: map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}}}
	}
	state, _ := json.Marshal(envelope{Upstream: u.name, Resend: true})
	return &server.RawResult{InputRequests: asks, State: state}, nil
}

// urlElicitations makes the inputRequests of a -32042's data: false when
// it lists none.
func urlElicitations(data any) (json.RawMessage, bool) {
	raw, _ := json.Marshal(data)
	var d struct {
		Elicitations []json.RawMessage `json:"elicitations"`
	}
	if json.Unmarshal(raw, &d) != nil || len(d.Elicitations) == 0 {
		return nil, false
	}
	type inputRequest struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	asks := make(map[string]inputRequest, len(d.Elicitations))
	for i, e := range d.Elicitations {
		m, ok := protocol.Members(e)
		if !ok {
			return nil, false
		}
		if _, set := m["mode"]; !set {
			e = protocol.SetMember(e, "mode", json.RawMessage(`"url"`))
		}
		asks["url"+strconv.Itoa(i+1)] = inputRequest{Method: "elicitation/create", Params: e}
	}
	out, err := json.Marshal(asks)
	return out, err == nil
}

// declaresURLElicitation reports whether a client declared elicitation in
// URL mode (docs/protocol.md §12.2: {"elicitation":{"url":{}}}).
func declaresURLElicitation(caps json.RawMessage) bool {
	m, _ := protocol.Members(caps)
	e, _ := protocol.Members(m["elicitation"])
	_, ok := e["url"]
	return ok
}

// resent is the params of a retry that re-sends the original call: the
// retry's inputResponses and requestState removed.
func resent(params json.RawMessage) json.RawMessage {
	return protocol.SetMember(protocol.SetMember(params, "inputResponses", nil), "requestState", nil)
}
