// Package cancelled holds the rules of notifications/cancelled that every
// transport applies the same way (docs/transport.md §9): which incoming
// cancellations have an effect at all, and the params of the ones snodod
// sends. What a cancellation then does to a request stays with each
// transport.
package cancelled

import "github.com/snodod/snodod/protocol"

// SubscriptionClosed is the reason snodod gives when it ends a listen
// stream itself (a shutdown, a restart, a stream it cannot hand over).
const SubscriptionClosed = "Subscription closed by server"

// Params are the params of a notifications/cancelled snodod sends.
type Params struct {
	RequestID protocol.ID `json:"requestId"`
	Reason    string      `json:"reason"`
}

// Parse reads a received notifications/cancelled from its params as the
// decoder split them (protocol.Message.Split). ok is false for one that is
// not valid by §9 and so has no effect: a requestId that is not an id, a
// reason that is not a string, a _meta that is not an object. reason is
// empty when absent.
func Parse(p *protocol.Split) (id protocol.ID, reason string, ok bool) {
	if id, ok = protocol.ParseID(p.Members.Value("requestId")); !ok {
		return protocol.ID{}, "", false
	}
	if raw, present := p.Members.Get("reason"); present {
		if reason, ok = protocol.String(raw); !ok {
			return protocol.ID{}, "", false
		}
	}
	if p.Members.Has("_meta") && !p.MetaObject {
		return protocol.ID{}, "", false
	}
	return id, reason, true
}
