package server

import (
	"context"
	"sync"

	"github.com/snodod/snodod/protocol"
)

// extensions are the hooks a view that relays another server installs;
// guarded by Server.mu.
type extensions struct {
	advertised    protocol.ServerCapabilities
	subscriptions SubscriptionHook
	readFallback  RawHandler
	toolList      ToolListFilter // toollist.go
}

// SubscriptionHook is told which resource URIs sessions subscribe to, so
// that a view relaying another server subscribes there too, once per URI
// however many sessions do (docs/upstreams.md §5). Both methods are called
// with the state of the session that subscribed (its Caller says who
// asks); they must not block.
//
// Subscribe is called for a legacy resources/subscribe of a URI the
// session does not have yet, and for each URI of a listen stream's
// resourceSubscriptions (two streams of a session may name the same URI:
// the hook counts). Unsubscribe is called for a legacy
// resources/unsubscribe of a URI the session has, and for each URI of a
// listen stream when it closes. A session that ends without unsubscribing is the hook owner's to
// notice: SessionState.Close calls nothing.
type SubscriptionHook interface {
	Subscribe(sess *SessionState, uri string)
	Unsubscribe(sess *SessionState, uri string)
}

// SetSubscriptionHook installs h (nil removes it).
func (s *Server) SetSubscriptionHook(h SubscriptionHook) {
	s.mu.Lock()
	s.ext.subscriptions = h
	s.mu.Unlock()
}

// SetReadFallback makes h serve every resources/read whose URI matches no
// resource or template (nil: "Resource not found"): a pass-through view
// relays to its server the URIs that server did not list.
func (s *Server) SetReadFallback(h RawHandler) {
	s.mu.Lock()
	s.ext.readFallback = h
	s.mu.Unlock()
}

func (s *Server) subscriptionHook() SubscriptionHook {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ext.subscriptions
}

// hookedStream tells the hook when a listen stream's subscriptions end.
type hookedStream struct {
	Stream
	sess *SessionState
	hook SubscriptionHook
	uris []string
	once sync.Once
}

func (h *hookedStream) Close(reason CloseReason, detail string) {
	h.once.Do(func() {
		for _, u := range h.uris {
			h.hook.Unsubscribe(h.sess, u)
		}
	})
	h.Stream.Close(reason, detail)
}

// hookStream reports a new listen stream's URIs to the hook, if any.
func (s *Server) hookStream(sess *SessionState, st *listenStream) Stream {
	hook := s.subscriptionHook()
	uris := st.ack.Notifications.ResourceSubscriptions
	if hook == nil || len(uris) == 0 {
		return st
	}
	for _, u := range uris {
		hook.Subscribe(sess, u)
	}
	return &hookedStream{Stream: st, sess: sess, hook: hook, uris: uris}
}

// RelayOwner returns the owner of the relayed resource or template that
// serves uri (not the read fallback), as a read would find it: an exact
// resource first, then the templates in order. ok is false when uri is
// not relayed.
func (s *Server) RelayOwner(uri string) (owner string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var relay *relayItem
	switch r, t, _ := s.resourceForLocked(uri); {
	case r != nil:
		relay = r.relay
	case t != nil:
		relay = t.relay
	}
	if relay == nil {
		return "", false
	}
	return relay.owner, true
}

// NotifyRequest sends a notification scoped to the request ctx belongs to
// (a relayed notifications/message), with the rules of Notifier: nothing
// after the request finished or was cancelled. It returns
// ErrProgressClosed when the request has no notifier.
func NotifyRequest(ctx context.Context, method string, params any) error {
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	if n == nil {
		return ErrProgressClosed
	}
	return n.Notify(method, params)
}
