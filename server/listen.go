package server

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/snodod/snodod/protocol"
)

// This file holds the two kinds of subscription built on the hub: the 2026
// subscriptions/listen stream (docs/protocol.md §9.1 to §9.6), a Stream the
// transport drives, and the legacy session feed whose changes become the
// §9.7 and §9.8 notification lines.

// listenFilter is a listen's accepted filter: the request intersected with
// the advertised capabilities (docs/protocol.md §9.2). uris nil means
// resourceSubscriptions was not kept; non-nil (even empty) means it was and
// is acknowledged as such.
type listenFilter struct {
	tools, prompts, resources bool
	uris                      []string
}

// accepter returns the feed filter: whether a change is inside lf. An update is delivered
// when its URI equals a subscribed URI, byte for byte (§9.3).
func (lf *listenFilter) accepter() func(change) bool {
	var set map[string]struct{}
	if len(lf.uris) > 0 {
		set = make(map[string]struct{}, len(lf.uris))
		for _, u := range lf.uris {
			set[u] = struct{}{}
		}
	}
	tools, prompts, resources := lf.tools, lf.prompts, lf.resources
	return func(c change) bool {
		switch c.kind {
		case changeTools:
			return tools
		case changePrompts:
			return prompts
		case changeResources:
			return resources
		case changeResourceUpdated:
			_, ok := set[c.uri]
			return ok
		}
		return false
	}
}

// The JSON shapes of a listen stream. Structs keep member order stable.
type (
	subscriptionMeta struct {
		SubscriptionID protocol.ID `json:"io.modelcontextprotocol/subscriptionId"`
	}
	acknowledgedParams struct {
		Meta          subscriptionMeta  `json:"_meta"`
		Notifications acknowledgedNotes `json:"notifications"`
	}
	acknowledgedNotes struct {
		ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
		PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
		ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
		ResourceSubscriptions []string `json:"resourceSubscriptions,omitzero"`
	}
	listChangedParams struct {
		Meta subscriptionMeta `json:"_meta"`
	}
	resourceUpdatedParams struct {
		URI  string           `json:"uri"`
		Meta subscriptionMeta `json:"_meta"`
	}
	listenCompleteResult struct {
		ResultType string             `json:"resultType"`
		Meta       listenCompleteMeta `json:"_meta"`
	}
	listenCompleteMeta struct {
		SubscriptionID protocol.ID `json:"io.modelcontextprotocol/subscriptionId"`
		ServerInfo     any         `json:"io.modelcontextprotocol/serverInfo"`
	}
)

// listenStream is an open subscriptions/listen stream. The transport calls
// Ack, then Next from one goroutine at a time, and Close once; Close and
// complete may be called concurrently with a blocked Next.
type listenStream struct {
	feed      *feed
	id        protocol.ID
	filter    listenFilter // as acknowledged, for a record (handover.go)
	version   string       // the listen's version, for a record
	meta      subscriptionMeta
	ack       acknowledgedParams
	final     listenCompleteResult
	completed atomic.Bool
}

var _ Stream = (*listenStream)(nil)

// newListenStream opens a stream for the listen with id id and the accepted
// filter; serverInfo is the value of the io.modelcontextprotocol/serverInfo
// member of the completion result. Duplicate URIs are dropped, first
// occurrence kept (§9.2).
func newListenStream(h *hub, id protocol.ID, filter listenFilter, serverInfo any) *listenStream {
	if filter.uris != nil {
		filter.uris = dedupeURIs(filter.uris)
	}
	meta := subscriptionMeta{SubscriptionID: id}
	return &listenStream{
		feed:   h.subscribe(filter.accepter(), nil),
		id:     id,
		filter: filter,
		meta:   meta,
		ack: acknowledgedParams{Meta: meta, Notifications: acknowledgedNotes{
			ToolsListChanged:      filter.tools,
			PromptsListChanged:    filter.prompts,
			ResourcesListChanged:  filter.resources,
			ResourceSubscriptions: filter.uris,
		}},
		final: listenCompleteResult{ResultType: "complete",
			Meta: listenCompleteMeta{SubscriptionID: id, ServerInfo: serverInfo}},
	}
}

// Ack returns the params of notifications/subscriptions/acknowledged.
func (s *listenStream) Ack() any { return s.ack }

// Next returns the stream's next event (§9.3), or its graceful end once
// complete was called. After Close it returns errFeedClosed.
func (s *listenStream) Next(ctx context.Context) (Event, error) {
	if s.completed.Load() {
		return s.end(), nil
	}
	c, err := s.feed.next(ctx)
	if err == errFeedClosed && s.completed.Load() {
		return s.end(), nil
	}
	if err != nil {
		return Event{}, err
	}
	if c.kind == changeResourceUpdated {
		return Event{Method: "notifications/resources/updated",
			Params: resourceUpdatedParams{URI: c.uri, Meta: s.meta}}, nil
	}
	method := listChangedMethod(c.kind)
	if method == "" {
		return Event{}, errUnknownChange // §9.6: an event that cannot be shaped
	}
	return Event{Method: method, Params: listChangedParams{Meta: s.meta}}, nil
}

func (s *listenStream) end() Event { return Event{Done: true, Final: s.final} }

// Close unsubscribes the stream. It is idempotent; the reason does not
// matter to the hub.
func (s *listenStream) Close(CloseReason, string) { s.feed.close() }

// complete ends the source gracefully (§9.6): the next Next, or a blocked
// one, returns Event{Done: true} with the completion result. Changes still
// waiting are dropped.
func (s *listenStream) complete() {
	s.completed.Store(true)
	s.feed.close()
}

// legacyEvent returns the legacy notification line for c: a list change
// without params (§9.8), or notifications/resources/updated with the URI
// (§9.7). method is "" for a change of no known kind: write nothing.
func legacyEvent(c change) (method string, params any) {
	if c.kind == changeResourceUpdated {
		return "notifications/resources/updated", legacyUpdatedParams{URI: c.uri}
	}
	return listChangedMethod(c.kind), nil
}

type legacyUpdatedParams struct {
	URI string `json:"uri"`
}

func listChangedMethod(k ChangeKind) string {
	switch k {
	case changeTools:
		return "notifications/tools/list_changed"
	case changePrompts:
		return "notifications/prompts/list_changed"
	case changeResources:
		return "notifications/resources/list_changed"
	}
	return ""
}

// errUnknownChange fails a listen stream given a change it cannot shape.
var errUnknownChange = errors.New("subscription event of unknown kind")

// dedupeURIs returns uris without repeats, first occurrences in order. It never
// returns nil for a non-nil argument.
func dedupeURIs(uris []string) []string {
	seen := make(map[string]struct{}, len(uris))
	out := make([]string, 0, len(uris))
	for _, u := range uris {
		if _, dup := seen[u]; !dup {
			seen[u] = struct{}{}
			out = append(out, u)
		}
	}
	return out
}
