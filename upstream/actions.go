package upstream

import (
	"context"
	"time"
)

// The waiting half of `snodod upstream start|stop|restart NAME`: the
// orders (Manager.Start, Stop) are sent to the instances' loops, which
// carry them out in their own time; Await waits for the outcome, so that
// the command can say what it did ("memory restarted (pid 24758)").

// Await waits until what Start, Restart (start true) or Stop (start false)
// asked of the upstream name at since is done, or ctx ends, and returns
// the upstream's status rows then. A start is done for an instance once it
// has made a start attempt at or after since and that attempt has ended:
// ready, or backoff or failed (the row's Cause says why). A stop is done
// once the instance is stopped. An instance that cannot do what was asked
// (disabled, draining) is done at once; one that waits for a place under
// upstreams.max_children is still waiting when ctx ends, and its row says
// what it is doing then. since must be taken before the order was sent.
func (m *Manager) Await(ctx context.Context, name string, start bool, since time.Time) ([]Status, error) {
	u := m.upstream(name)
	if u == nil {
		return nil, m.unknown(name)
	}
	u.each(func(in *instance) {
		for {
			in.mu.Lock()
			done := in.doneSince(start, since)
			changed := in.changed
			in.mu.Unlock()
			if done {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-m.done:
				return
			}
		}
	})
	var rows []Status
	for _, r := range m.Status() {
		if r.Name == name {
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// doneSince reports whether a start (or a stop) asked at since is done;
// in.mu is held.
func (in *instance) doneSince(start bool, since time.Time) bool {
	switch in.state {
	case StateDisabled, StateDraining:
		return true
	case StateStarting:
		return false
	}
	if !start {
		return in.state == StateStopped
	}
	return !in.lastAttempt.Before(since)
}
