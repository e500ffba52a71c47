package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// connConfig is how the instance's Conn is made: snodod's clientInfo, the
// capabilities it can honour (roots only when it has an answer; sampling
// and elicitation, relayed to an attributed session, docs/upstreams.md §5), the
// upstream's shared stderr ring, the era the cache knows.
func (in *instance) connConfig() ConnConfig {
	cfg := in.u.conf()
	caps := map[string]any{
		"sampling":    map[string]any{},
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
	}
	if len(in.roots) > 0 {
		caps["roots"] = map[string]any{}
	}
	rawCaps, _ := json.Marshal(caps)
	known := ""
	if cat := in.u.currentCatalog(); cat != nil && cfg.Protocol == "auto" {
		known = cat.Era
	}
	return ConnConfig{
		Name: in.u.name, Protocol: cfg.Protocol, KnownEra: known, MaxLineBytes: in.u.m.opts.MaxLineBytes,
		ClientInfo:         protocol.Implementation{Name: "snodod", Version: in.u.m.opts.Version},
		ClientCapabilities: rawCaps,
		Stderr:             in.u.ring,
		Logger:             in.u.m.log,
		Handler:            in,
		Record:             in.u.m.groupRecord(),
	}
}

// Request is the instance's Handler for requests from a legacy upstream
// (docs/upstreams.md §5): roots/list is answered from the configuration (or
// the client's directory); sampling/createMessage and elicitation/create
// go to the one session that owns every request in flight: to a legacy
// client as a request, to a 2026 client as input_required of its parked
// call. Anything else is -32601.
func (in *instance) Request(ctx context.Context, method string, params json.RawMessage, owners []any) (json.RawMessage, *protocol.Error) {
	switch method {
	case "roots/list":
		return in.listRoots()
	case "sampling/createMessage", "elicitation/create":
	default:
		return nil, &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: " + method}
	}
	o, sessions := attribute(owners)
	if o == nil {
		in.mu.Lock()
		in.stats.unattributed++
		in.mu.Unlock()
		in.u.m.log.Warn("upstream request not attributable", "upstream", in.u.name, "method", method, "sessions", sessions)
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: cannot attribute %s: %d sessions have requests in flight on %s; set share = \"session\"", method, sessions, in.u.name)}
	}
	if method == "sampling/createMessage" {
		// Context from "this server" or "all servers" means nothing behind
		// an aggregator (docs/upstreams.md §5).
		if m, _ := protocol.Members(params); m != nil {
			if _, ok := m["includeContext"]; ok {
				params = withMember(params, "includeContext", "none")
			}
		}
	}
	if o.modern {
		return in.u.m.parks.park(ctx, o, method, params)
	}
	res, err := server.RequestClient(o.ctx, method, params)
	if err == nil {
		return res, nil
	}
	var perr *protocol.Error
	if errors.Is(err, server.ErrMissingClientCapability) {
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: the session that owns this call did not declare the capability %s needs", method)}
	}
	if errors.As(err, &perr) {
		return nil, perr
	}
	return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: " + method + " could not be relayed to the client: " + err.Error()}
}

// listRoots answers roots/list from the configuration's roots, or the
// client's working directory for cwd and session instances.
func (in *instance) listRoots() (json.RawMessage, *protocol.Error) {
	type root struct {
		URI  string `json:"uri"`
		Name string `json:"name,omitempty"`
	}
	roots := make([]root, 0, len(in.roots))
	for _, r := range in.roots {
		name := r[strings.LastIndexByte(r, '/')+1:]
		roots = append(roots, root{URI: r, Name: name})
	}
	b, err := json.Marshal(map[string]any{"roots": roots})
	if err != nil {
		return nil, protocol.ErrInvalidResult
	}
	return b, nil
}
