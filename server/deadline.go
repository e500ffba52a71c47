package server

import (
	"context"
	"time"
)

// ExtendDeadline replaces the executor deadline of the request ctx belongs
// to: it now times out d from now (transport.md §13.4). A handler that
// relays to a server with its own, longer request timeout (a hosted
// upstream's request_timeout, upstreams.md §7) calls it before it waits.
// It reports false outside an executor's handler, or for a request that
// has already ended. d <= 0 is ignored.
func ExtendDeadline(ctx context.Context, d time.Duration) bool {
	j, _ := ctx.Value(jobKey{}).(*job)
	if j == nil || d <= 0 || j.ctx.Err() != nil || j.timer == nil {
		return false
	}
	j.timer.Reset(d)
	return true
}

type jobKey struct{}
