package upstream

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// subscribeTimeout bounds an upstream resources/subscribe or unsubscribe.
const subscribeTimeout = 10 * time.Second

// Notify is the instance's Handler for what its upstream sends on its own
// (docs/upstreams.md §5): list changes are re-listed and announced by the
// views, resource updates go to subscribed sessions, log messages are
// attributed like requests; anything else is dropped and counted. It runs
// on the Conn's reader and never blocks.
func (in *instance) Notify(method string, params json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed":
		in.resync("tools/list")
	case "notifications/prompts/list_changed":
		in.resync("prompts/list")
	case "notifications/resources/list_changed":
		in.resync("resources/list")
		in.resync("resources/templates/list")
	case "notifications/resources/updated":
		m, _ := protocol.Members(params)
		if uri, ok := protocol.String(m["uri"]); ok {
			in.u.m.resourceUpdated(in.u.name, uri)
		}
	case "notifications/message":
		in.logMessage(params)
	case "notifications/subscriptions/acknowledged":
	default:
		in.mu.Lock()
		in.stats.dropped++
		in.mu.Unlock()
	}
}

// resync re-lists one kind, one resync per instance and kind at a time;
// changes announced meanwhile coalesce into one more (docs/upstreams.md §5).
func (in *instance) resync(method string) {
	in.mu.Lock()
	if in.resyncing == nil {
		in.resyncing = map[string]int{}
	}
	n := in.resyncing[method]
	in.resyncing[method] = min(n+1, 2)
	in.mu.Unlock()
	if n > 0 {
		return
	}
	go func() {
		for {
			in.mu.Lock()
			conn := in.conn
			in.mu.Unlock()
			if cat := in.u.currentCatalog(); conn != nil && cat != nil {
				ctx, cancel := context.WithTimeout(context.Background(), in.u.conf().StartTimeout)
				next, err := relist(ctx, conn, cat, method, in.u.m.log.With("upstream", in.u.name))
				cancel()
				if err == nil {
					in.u.listed(next)
				} else {
					in.u.m.log.Warn("upstream re-listing failed", "upstream", in.u.name, "method", method, "err", err)
				}
			}
			in.mu.Lock()
			in.resyncing[method]--
			again := in.resyncing[method] > 0
			in.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// logMessage delivers an upstream's notifications/message to the one
// session with requests in flight on the instance, if its level admits
// it (legacy: its logging/setLevel; 2026: the request's logLevel); a
// message that no session gets goes to the daemon's log (docs/upstreams.md §5).
func (in *instance) logMessage(params json.RawMessage) {
	var msg struct {
		Level  string          `json:"level"`
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(params, &msg)
	in.mu.Lock()
	owners := make([]any, len(in.owners))
	for i, o := range in.owners {
		owners[i] = o
	}
	in.mu.Unlock()
	o, _ := attribute(owners)
	switch {
	case o == nil:
	case !o.modern:
		if server.LogEnabled(o.ctx, msg.Level) {
			server.Log(o.ctx, msg.Level, msg.Logger, msg.Data)
			return
		}
	case o.logLevel != "":
		want, _ := protocol.LogLevelRank(o.logLevel)
		if got, ok := protocol.LogLevelRank(msg.Level); ok && got >= want {
			_ = server.NotifyRequest(o.ctx, "notifications/message", params)
			return
		}
	}
	in.u.m.log.Info("upstream log message", "upstream", in.u.name, "level", msg.Level, "logger", msg.Logger, "data", string(msg.Data))
}

// attribute finds the one session that owns every request in flight
// (owners as the Conn or the instance track them, oldest first): its
// oldest owner, or nil and the number of sessions involved.
func attribute(owners []any) (*owner, int) {
	var first *owner
	sessions := map[any]bool{}
	for _, x := range owners {
		o, ok := x.(*owner)
		if !ok {
			continue
		}
		var key any = o
		if o.client != nil {
			key = o.client
		}
		sessions[key] = true
		if first == nil {
			first = o
		}
	}
	if len(sessions) != 1 {
		return nil, len(sessions)
	}
	return first, 1
}

// subscribe counts one session's subscription to uri; the first
// subscribes upstream when the process runs (else at its start).
func (in *instance) subscribe(uri string) {
	in.mu.Lock()
	in.subs[uri]++
	first, conn := in.subs[uri] == 1, in.conn
	in.mu.Unlock()
	if first && conn != nil {
		in.upstreamSubscribe(conn, []string{uri}, true)
	}
}

// unsubscribe drops one; the last unsubscribes upstream.
func (in *instance) unsubscribe(uri string) {
	in.mu.Lock()
	n := in.subs[uri]
	if n == 0 {
		in.mu.Unlock()
		return
	}
	if n == 1 {
		delete(in.subs, uri)
	} else {
		in.subs[uri] = n - 1
	}
	conn := in.conn
	in.mu.Unlock()
	if n == 1 && conn != nil {
		in.upstreamSubscribe(conn, []string{uri}, false)
	}
}

// resubscribe holds every counted subscription on a process that just
// became ready; a 2026 upstream gets its listen stream.
func (in *instance) resubscribe(conn *mcpclient.Conn) {
	if conn.Era() == mcpclient.Era2026 {
		in.relisten(conn) // it reads the counted URIs itself
		return
	}
	in.mu.Lock()
	uris := slices.Collect(maps.Keys(in.subs))
	in.mu.Unlock()
	if len(uris) > 0 {
		in.upstreamSubscribe(conn, uris, true)
	}
}

// upstreamSubscribe sends resources/subscribe (or unsubscribe) for uris
// to a legacy upstream, or re-opens a 2026 upstream's listen stream with
// the new set. It does not wait.
func (in *instance) upstreamSubscribe(conn *mcpclient.Conn, uris []string, on bool) {
	if conn.Era() == mcpclient.Era2026 {
		in.relisten(conn)
		return
	}
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	go func() {
		for _, uri := range uris {
			ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
			params, _ := json.Marshal(map[string]string{"uri": uri})
			_, err := conn.Call(ctx, method, params, mcpclient.CallOptions{})
			cancel()
			if err != nil {
				in.u.m.log.Warn("upstream "+method+" failed", "upstream", in.u.name, "uri", uri, "err", err)
			}
		}
	}()
}

// relisten (re)opens a 2026 upstream's subscriptions/listen stream: list
// changes of every kind and the subscribed URIs, whose events arrive
// through Notify. It replaces the previous stream.
func (in *instance) relisten(conn *mcpclient.Conn) {
	in.mu.Lock()
	if in.listenCancel != nil {
		in.listenCancel()
	}
	uris := make([]string, 0, len(in.subs)) // [] rather than null in the filter
	for u := range in.subs {
		uris = append(uris, u)
	}
	slices.Sort(uris)
	ctx, cancel := context.WithCancel(context.Background())
	in.listenCancel = cancel
	in.mu.Unlock()
	caps := parseCapabilities(conn.Capabilities())
	filter := map[string]any{
		"toolsListChanged":     caps.Tools != nil,
		"promptsListChanged":   caps.Prompts != nil,
		"resourcesListChanged": caps.Resources != nil,
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		filter["resourceSubscriptions"] = uris
	}
	params, _ := json.Marshal(map[string]any{"notifications": filter})
	go func() {
		defer cancel()
		go func() { // the stream ends with the process
			select {
			case <-conn.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := conn.Call(ctx, "subscriptions/listen", params, mcpclient.CallOptions{}); err != nil && ctx.Err() == nil {
			in.u.m.log.Debug("upstream listen stream ended", "upstream", in.u.name, "err", err)
		}
	}()
}
