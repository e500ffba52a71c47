package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/snodod/snodod/protocol"
)

// pageSize is the number of items per list page (docs/protocol.md §10.1).
const pageSize = 100

// paginate serves one page of a list sorted by key, checking the cursor
// against the list's revision (listRev) at the catalog revision it was
// taken at. The list's fingerprint is computed only when a cursor is read
// or issued.
func paginate[T any](c *call, items []T, revision uint64, key func(T) string) ([]T, string, Outcome, bool) {
	rev := listRev{revision: revision}
	offset := 0
	if raw, ok := c.split.Members.Get("cursor"); ok {
		rev.fingerprint = fingerprint(items, key)
		var valid bool
		offset, valid = c.s.signer.parseCursor(raw, c.req.Method, c.version, rev, pageSize)
		if !valid {
			return nil, "", invalidParams("Invalid pagination cursor"), false
		}
	}
	out, next, more := page(items, offset, pageSize)
	cursor := ""
	if more {
		if rev.fingerprint == 0 {
			rev.fingerprint = fingerprint(items, key)
		}
		cursor = c.s.signer.cursor(c.req.Method, c.version, rev, pageSize, next)
	}
	return out, cursor, Outcome{}, true
}

// visible reports whether a tool is served in this era: legacy eras hide a
// tool whose input or output schema is not an object schema (§6.1).
func (c *call) visible(e *toolEntry) bool {
	return c.modern || e.input.isObject() && (e.output == nil || e.output.isObject())
}

// list serves one page of a list method: each entry's view (false leaves
// it out) taken under the read lock with the catalog revision, sorted by
// key, paginated and shaped as member name. The entry maps are made once
// by New and only ever changed under the lock.
func list[E, T any](c *call, name string, entries map[string]E, view func(E) (T, bool), key func(T) string) Outcome {
	return filteredList(c, name, entries, view, key, nil)
}

// filteredList is list with the sorted items passed through filter, when
// set, before they are paginated.
func filteredList[E, T any](c *call, name string, entries map[string]E, view func(E) (T, bool), key func(T) string, filter func([]T) []T) Outcome {
	c.s.mu.RLock()
	rev, items := c.s.revision, make([]T, 0, len(entries))
	for _, e := range entries {
		if v, ok := view(e); ok {
			items = append(items, v)
		}
	}
	c.s.mu.RUnlock()
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	if filter != nil {
		items = filter(items)
	}
	out, cursor, fail, ok := paginate(c, items, rev, key)
	if !ok {
		return fail
	}
	page := map[string]any{name: out}
	if cursor != "" {
		page["nextCursor"] = cursor
	}
	return c.result(page, true, nil)
}

// dropIcons reports whether this version's listings leave icons out (§3.5).
func (c *call) dropIcons() bool { return c.version == protocol.Version20250618 }

// The list views: a relayed entry (relay.go) is listed as it was relayed.

func (c *call) listTools() Outcome {
	return filteredList(c, "tools", c.s.tools, func(e *toolEntry) (listedItem, bool) {
		if e.relay != nil {
			return e.relay.item(c.dropIcons()), true
		}
		t := e.tool
		if c.dropIcons() {
			t.Icons = nil
		}
		return listedItem{key: t.Name, v: t}, c.visible(e)
	}, listedKey, c.filterTools)
}

// filterTools applies the server's ToolListFilter (toollist.go) to a
// sorted listing.
func (c *call) filterTools(items []listedItem) []listedItem {
	f := c.s.toolListFilter()
	if f == nil {
		return items
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.key
	}
	keep := c.keepTools(f, names)
	if keep == nil {
		return items
	}
	return slices.DeleteFunc(items, func(it listedItem) bool { return !keep(it.key) })
}

func (c *call) listResources() Outcome {
	return list(c, "resources", c.s.resources, func(e *resourceEntry) (listedItem, bool) {
		if e.relay != nil {
			return e.relay.item(c.dropIcons()), true
		}
		r := e.resource
		if c.dropIcons() {
			r.Icons = nil
		}
		return listedItem{key: r.URI, v: r}, true
	}, listedKey)
}

func (c *call) listTemplates() Outcome {
	return list(c, "resourceTemplates", c.s.templates, func(e *templateEntry) (listedItem, bool) {
		if e.relay != nil {
			return e.relay.item(c.dropIcons()), true
		}
		t := e.template
		if c.dropIcons() {
			t.Icons = nil
		}
		return listedItem{key: t.URITemplate, v: t}, true
	}, listedKey)
}

func (c *call) listPrompts() Outcome {
	return list(c, "prompts", c.s.prompts, func(e *promptEntry) (listedItem, bool) {
		if e.relay != nil {
			return e.relay.item(c.dropIcons()), true
		}
		p := e.prompt
		if c.dropIcons() {
			p.Icons = nil
		}
		return listedItem{key: p.Name, v: p}, true
	}, listedKey)
}

func stringParam(params protocol.Object, name string) (string, bool) {
	return protocol.String(params.Value(name))
}

// stringMap decodes an optional object of strings; ok is false for anything
// else.
func stringMap(raw json.RawMessage) (map[string]string, bool) {
	if raw == nil {
		return map[string]string{}, true
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

// mrtr prepares a handler's context for client input: in 2026 the retry's
// answers and a valid requestState. Legacy requests need nothing here: their
// handlers send requests to the client (withLegacy).
func (c *call) mrtr(ctx context.Context) (context.Context, *inputs, *Outcome) {
	if !c.modern {
		return ctx, nil, nil // legacy handlers ask the client (RequestClient)
	}
	responses, state, perr := decodeRetry(c.split.Members)
	if perr != nil {
		o := errOutcome(perr)
		return ctx, nil, &o
	}
	if state != nil {
		earlier, ok := c.s.signer.openState(*state, c.req.Method, c.req.Params, now())
		if !ok {
			o := invalidParams("Invalid requestState")
			return ctx, nil, &o
		}
		// Answers of earlier rounds travel in the state; this round's
		// answers win.
		for k, v := range earlier {
			if _, ok := responses[k]; !ok {
				if responses == nil {
					responses = map[string]json.RawMessage{}
				}
				responses[k] = v
			}
		}
	}
	c.answers = responses
	// The call's context now answers the inputs (callContext).
	c.inputs.responses, c.asking = responses, true
	return ctx, &c.inputs, nil
}

var (
	errInputNotSupported = &protocol.Error{Code: protocol.CodeInternalError, Message: "Input requests are not supported in this protocol version"}
	errInternal          = &protocol.Error{Code: protocol.CodeInternalError, Message: "Internal error"}
)

// handlerError maps what a handler returned when it asked for input.
// handled is false for an ordinary error, which the method reports its own
// way.
func (c *call) handlerError(in *inputs, err error) (Outcome, bool) {
	if key := in.invalid(); key != "" {
		return errOutcome(invalidInputReply(key)), true
	}
	if err == nil {
		return Outcome{}, false
	}
	var missing *missingCapabilityError
	switch {
	case errors.Is(err, errInputUnsupported):
		return errOutcome(errInputNotSupported), true
	case !c.modern && errors.As(err, &missing):
		// A legacy client that did not declare the capability: nothing
		// was sent (docs/protocol.md §3.1, §14.2 case 9).
		return errOutcome(&protocol.Error{Code: protocol.CodeInternalError, Message: "Client does not support " + missing.method}), true
	case errors.Is(err, ErrInputRequired):
		return c.inputRequired(in), true
	}
	return Outcome{}, false
}

// inputRequired answers a round that needs client input (docs/protocol.md
// §12.1, §12.2).
func (c *call) inputRequired(in *inputs) Outcome {
	requests := in.requested()
	if missing := missingCapabilities(requests, c.clientCaps()); missing != nil {
		return errOutcome(missingCapabilityReply(missing))
	}
	type inputRequiredResult struct {
		ResultType    string                  `json:"resultType"`
		InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
		RequestState  string                  `json:"requestState"`
		Meta          any                     `json:"_meta"`
	}
	return Outcome{Result: inputRequiredResult{
		ResultType:    "input_required",
		InputRequests: requests,
		RequestState:  c.s.signer.stateWith(c.req.Method, c.req.Params, c.answers, now()),
		Meta:          c.resultMeta(nil),
	}}
}

func (c *call) setLevel() Outcome {
	level, _ := stringParam(c.split.Members, "level")
	rank, ok := protocol.LogLevelRank(level)
	if !ok {
		return invalidParams("Invalid log level")
	}
	c.sess.setLogRank(rank)
	return Outcome{Result: struct{}{}}
}

func (c *call) subscribe(ctx context.Context) Outcome {
	uri, ok := stringParam(c.split.Members, "uri")
	if !ok || !protocol.IsAbsoluteURI(uri) {
		return invalidParams(c.req.Method + " requires an absolute URI")
	}
	hook, had := c.s.subscriptionHook(), c.sess.subscribed(uri)
	if c.req.Method == "resources/unsubscribe" {
		c.sess.unsubscribe(uri)
		if hook != nil && had {
			hook.Unsubscribe(c.sess, uri)
		}
	} else if !c.sess.subscribe(uri) {
		return errOutcome(protocol.ErrSubscriptionCap)
	} else if hook != nil && !had {
		hook.Subscribe(c.sess, uri)
	}
	return Outcome{Result: struct{}{}}
}

func (c *call) listen(ctx context.Context) Outcome {
	filter, perr := protocol.DecodeListen(c.req.Params)
	if perr != nil {
		return errOutcome(perr)
	}
	f := filter.Accept(c.caps)
	ls := newListenStream(c.s.hub, c.req.ID, listenFilter{
		tools: f.ToolsListChanged, prompts: f.PromptsListChanged, resources: f.ResourcesListChanged, uris: f.ResourceSubscriptions,
	}, c.s.serverInfo(c.version))
	ls.version = c.version
	return Outcome{Stream: c.s.hookStream(c.sess, ls)}
}
