package server

import (
	"github.com/snodod/snodod/protocol"
)

// log forwards a legacy handler's log message at or above the session's
// threshold to the transport's request notifier (protocol.md §11).
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
