package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// inputRequired is a 2026 result's input_required part.
type inputRequired struct {
	ResultType    string          `json:"resultType"`
	InputRequests json.RawMessage `json:"inputRequests"`
	RequestState  *string         `json:"requestState"`
}

// inputRounds passes a 2026 upstream's input_required on: verbatim to a
// 2026 client, with its requestState in snodod's envelope; to a legacy
// client as requests to it, then a retry, at most maxInputRounds times.
func (u *upstream) inputRounds(ctx context.Context, in *instance, conn *mcpclient.Conn, o *owner, method string, params json.RawMessage, req *server.RawRequest, raw json.RawMessage) (*server.RawResult, error) {
	for round := 0; ; round++ {
		if !inputRequiredType(raw) {
			return &server.RawResult{Result: raw}, nil
		}
		var ir inputRequired
		if json.Unmarshal(raw, &ir) != nil || ir.ResultType != "input_required" {
			return &server.RawResult{Result: raw}, nil
		}
		inner := ""
		if ir.RequestState != nil {
			inner = *ir.RequestState
		}
		if o.modern {
			state, _ := json.Marshal(envelope{Upstream: u.name, Inner: inner})
			return &server.RawResult{InputRequests: ir.InputRequests, State: state}, nil
		}
		if round >= maxInputRounds {
			return nil, &protocol.Error{Code: protocol.CodeInternalError,
				Message: fmt.Sprintf("snodod: upstream %q asked for input more than %d times in one call", u.name, maxInputRounds)}
		}
		var asks map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(ir.InputRequests, &asks) != nil {
			return nil, protocol.ErrInvalidResult
		}
		answers := map[string]json.RawMessage{}
		for key, a := range asks {
			res, err := server.RequestClient(ctx, a.Method, a.Params)
			if err != nil {
				return nil, clientError(err)
			}
			answers[key] = res
		}
		retry := withMember(params, "inputResponses", answers)
		if ir.RequestState != nil {
			retry = withMember(retry, "requestState", inner)
		}
		var err error
		if raw, err = in.callOnce(ctx, conn, o, method, retry, req); err != nil {
			var exit *mcpclient.ExitError
			if errors.As(err, &exit) || errors.Is(err, mcpclient.ErrClosed) {
				return nil, in.exitedDuring(exit)
			}
			return nil, err
		}
	}
}

// inputRequiredType reports whether result's resultType member is
// input_required, without decoding the rest: a final result, the common
// one, is passed on as it is, however large, with no reflection and no
// allocation (json.Unmarshal of every result only to read this
// member cost each relayed call a pass over the whole of it). The
// member's name is compared as written, as server's shapeRelayed does; the
// last one counts, as for json.Unmarshal.
func inputRequiredType(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte(`"resultType"`)) {
		return false // the name as written is in its text, if it is a member
	}
	is := false
	protocol.EachMember(result, func(name, value json.RawMessage) bool {
		if string(name) == `"resultType"` {
			t, _ := protocol.String(value)
			is = t == "input_required"
		}
		return true
	})
	return is
}
