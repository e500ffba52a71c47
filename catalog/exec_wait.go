package catalog

import (
	"context"
	"time"

	"github.com/snodod/snodod/server/executor"
)

// deadlineMargin is what the executor deadline of a run leaves after the
// longest a timed-out run takes to end (execTool.deadline).
const deadlineMargin = time.Second

// waitOnChild is called once a run's child has started: from then on the
// request only waits on it, so it gives its executor slot back, the tool's
// max_concurrency bounding such runs (docs/transport.md §13.7), and its
// executor deadline becomes the tool's own (docs/config.md, "Which
// deadline wins"): session.request_timeout would otherwise cut a run
// before its timeout, 60 s by default against 30 s.
func (t *execTool) waitOnChild(ctx context.Context) {
	executor.ExtendDeadline(ctx, t.deadline())
	executor.Detach(ctx)
}

// deadline is how long a run may take from its start: its timeout, then
// the stop of its group (SIGTERM, StopGrace, SIGKILL), then at most
// StopGrace more for pipes held open by a process that left the group, and
// a margin, so that the run's own "timed out" result is what the client
// gets rather than the executor's -32603.
func (t *execTool) deadline() time.Duration {
	return t.cfg.Timeout + 2*StopGrace + deadlineMargin
}
