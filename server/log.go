package server

import (
	"context"

	"github.com/snodod/snodod/protocol"
)

// sessionLog forwards a legacy handler's log messages at or above the
// session's threshold to the transport's request notifier (protocol.md §11).
type sessionLog struct {
	sess     *SessionState
	notifier Notifier
}

func (l sessionLog) log(level, logger string, data any) {
	rank, ok := protocol.LogLevelRank(level)
	if !ok || rank < l.sess.logThreshold() {
		return
	}
	type message struct {
		Level  string `json:"level"`
		Logger string `json:"logger,omitempty"`
		Data   any    `json:"data"`
	}
	_ = l.notifier.Notify("notifications/message", message{level, logger, data})
}

// withLegacyLog lets Log reach the client in a legacy era, when the
// transport gave the request a notifier.
func withLegacyLog(ctx context.Context, sess *SessionState) context.Context {
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	if n == nil {
		return ctx
	}
	return context.WithValue(ctx, logKey{}, sessionLog{sess: sess, notifier: n})
}
