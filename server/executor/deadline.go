package executor

import (
	"context"
	"time"
)

// ExtendDeadline replaces the executor deadline of the request ctx belongs
// to: it now times out d from now (docs/transport.md §13.4). A handler that
// relays to a server with its own, longer request timeout (a hosted
// upstream's request_timeout, docs/upstreams.md §7) calls it before it waits.
// It reports false outside an executor's handler, or for a request that
// has already ended. d <= 0 is ignored.
func ExtendDeadline(ctx context.Context, d time.Duration) bool {
	j, _ := ctx.Value(jobKey{}).(*job)
	if j == nil || d <= 0 {
		return false
	}
	e := j.conn.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if j.state != jobRunning {
		return false
	}
	e.unrunLocked(j)
	j.deadline = time.Now().Add(d)
	e.runSortedLocked(j)
	return true
}

type jobKey struct{}

// runSortedLocked puts the running j into the running list at its
// deadline's place (an extended deadline is no longer in start order),
// and sets the deadlines timer for it when it is first. e.mu is held.
func (e *Executor) runSortedLocked(j *job) {
	after := e.run.tail
	for after != nil && after.elem.deadline.After(j.deadline) {
		after = after.prev
	}
	e.run.insertAfter(after, &j.run, j)
	e.armLocked(&e.deadlines, &e.deadlineAt, e.run.front().deadline, deadlineTimer)
}
