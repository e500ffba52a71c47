package server

import (
	"context"

	"github.com/snodod/snodod/protocol"
)

// log forwards a legacy handler's log message at or above the session's
// threshold to the transport's request notifier (docs/protocol.md §11).
func (l *legacyCall) log(level, logger string, data any) {
	if l.notifier == nil {
		return
	}
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

// LogEnabled reports whether Log at level would send a message for the
// request ctx belongs to: a legacy request whose session's threshold
// admits level (docs/protocol.md §11). A relay that must log what the client
// does not get elsewhere asks it first.
func LogEnabled(ctx context.Context, level string) bool {
	l, ok := ctx.Value(legacyKey{}).(*legacyCall)
	if !ok || l.notifier == nil {
		return false
	}
	rank, ok := protocol.LogLevelRank(level)
	return ok && rank >= l.sess.logThreshold()
}
