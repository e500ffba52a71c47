package executor

import (
	"fmt"
	"slices"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// The executor's queues: turns between connections, the shared places'
// reserve, and each connection's own places (ConnQueue).

// Each connection's work starts in admission order; connections with queued
// work take turns, so a busy connection cannot starve another.
func TestExecutorFairness(t *testing.T) {
	var busy []string // 50 items of A, then 1 of B
	for i := range 50 {
		busy = append(busy, fmt.Sprint("A", i))
	}
	busy = append(busy, "B0")
	tests := []struct {
		name      string
		submitted []string // connection name + item number
		want      []string // start order after the blocker
	}{
		{"busy connection does not starve another", busy,
			slices.Concat([]string{"A0", "B0"}, busy[1:50])},
		{"round robin", []string{"A1", "A2", "B1", "A3", "B2", "C1", "B3"},
			[]string{"A1", "B1", "C1", "A2", "B2", "A3", "B3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			e := newExec(t, Limits{MaxConcurrency: 1, MaxQueue: 100})
			conns := map[string]*Conn{"A": e.Conn(), "B": e.Conn(), "C": e.Conn()}
			blocker := r.blocking("blocker")
			mustSubmit(t, conns["A"], "blocker", blocker)
			for _, name := range tt.submitted {
				mustSubmit(t, conns[name[:1]], name, r.instant(name))
			}
			blocker.Release()
			got := nextStarts(t, r, len(tt.submitted)+1)[1:]
			if !slices.Equal(got, tt.want) {
				t.Fatalf("start order %v, want %v", got, tt.want)
			}
			idle(t, e)
		})
	}
}

// queueStep is one submission behind a blocker: the connection it is made
// on, and whether it must be refused for capacity.
type queueStep struct {
	conn    string
	refused bool
}

// queueRig submits steps behind a running blocker on an executor with
// concurrency 1, one connection per name.
type queueRig struct {
	t       *testing.T
	e       *Executor
	r       *recorder
	blocker *fake
	conns   map[string]*Conn
}

func newQueueRig(t *testing.T, l Limits) *queueRig {
	l.MaxConcurrency = 1
	q := &queueRig{t: t, e: newExec(t, l), r: newRecorder(), conns: map[string]*Conn{}}
	q.blocker = q.r.blocking("blocker")
	mustSubmit(t, q.e.Conn(), "blocker", q.blocker)
	return q
}

func (q *queueRig) run(steps []queueStep) {
	q.t.Helper()
	for i, step := range steps {
		c := q.conns[step.conn]
		if c == nil {
			c = q.e.Conn()
			q.conns[step.conn] = c
		}
		err := submit(c, fmt.Sprint(i), q.r.instant(fmt.Sprint(step.conn, i)))
		if (err != nil) != step.refused || (err != nil && err != protocol.ErrCapacity) {
			q.t.Fatalf("step %d (%s) = %v, want refused %v (ErrCapacity)", i, step.conn, err, step.refused)
		}
	}
}

// end cancels what waits, releases the blocker and checks the executor
// settles.
func (q *queueRig) end() {
	q.t.Helper()
	for _, c := range q.conns {
		c.CancelAll()
	}
	q.blocker.Release()
	expectDeliveries(q.t, q.r, "blocker")
	settle(q.t, q.e, q.r)
}

func TestExecutorQueueReserve(t *testing.T) {
	tests := []struct {
		queue int
		steps []queueStep
	}{
		// MaxQueue 8: 2 places are kept for connections with nothing queued.
		{8, []queueStep{{"A", false}, {"A", false}, {"A", false}, {"A", false}, {"A", false}, {"A", false},
			{"A", true}, {"B", false}, {"B", true}, {"C", false}, {"D", true}}},
		// No reserve below 4: one connection may fill the queue.
		{3, []queueStep{{"A", false}, {"A", false}, {"A", false}, {"A", true}, {"B", true}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("queue %d", tt.queue), func(t *testing.T) {
			q := newQueueRig(t, Limits{MaxQueue: tt.queue})
			q.run(tt.steps)
			q.end()
		})
	}
}

// Each connection's own queue places (ConnQueue), at their exact
// boundary: a connection is never refused while it has fewer than
// ConnQueue items waiting, however full the shared places are; beyond
// them it competes for the shared places under the reserve rule.
func TestExecutorConnQueue(t *testing.T) {
	// ConnQueue 2, MaxQueue 4 (a reserve of 1: a connection already in
	// the shared places is refused once they hold 3).
	q := newQueueRig(t, Limits{MaxQueue: 4, ConnQueue: 2})
	q.run([]queueStep{
		{"A", false}, {"A", false}, // A's own places
		{"A", false}, {"A", false}, {"A", false}, // shared 1 to 3
		{"A", true},                // shared 3: the reserve is not A's
		{"B", false}, {"B", false}, // B's own places, shared full or not
		{"B", false},               // shared 4: B had none there yet
		{"B", true},                // shared full
		{"C", false}, {"C", false}, // C's own places: still admitted
		{"C", true}, // shared full
	})
	expectStats(t, "executor", q.e.Stats(), Stats{Running: 1, Queued: 10})
	// Cancelling queued work frees shared places first: A, down to its own
	// two, leaves room in the shared places for B again.
	for _, id := range []string{"2", "3", "4"} {
		q.conns["A"].Cancel(protocol.StringID(id))
	}
	if err := submit(q.conns["B"], "again", q.r.instant("B again")); err != nil {
		t.Fatalf("B after A left the shared places: %v", err)
	}
	q.end()
}

// With the daemon's limits (32 running, 256 shared queue places, 4 of each
// session's own), 1,024 sessions that each have a request running or
// waiting, and then 3 more each, are all admitted (docs/transport.md
// §13.2): the shared queue alone once let the first sessions crowd out
// the rest.
func TestExecutorEverySessionHasRoom(t *testing.T) {
	const sessions = 1024
	r := newRecorder()
	r.starts = make(chan string, sessions*4)
	r.deliveries = make(chan delivery, sessions*4)
	e := newExec(t, Limits{ConnQueue: 4})
	blockers := make([]*fake, 0, DefaultMaxConcurrency)
	conns := make([]*Conn, sessions)
	for i := range conns {
		conns[i] = e.Conn()
		f := r.instant(fmt.Sprint(i))
		if i < DefaultMaxConcurrency {
			f = r.blocking(fmt.Sprint(i))
			blockers = append(blockers, f)
		}
		if err := submit(conns[i], "first", f); err != nil {
			t.Fatalf("session %d's first request: %v", i, err)
		}
	}
	for round := range 3 {
		for i, c := range conns {
			if err := submit(c, fmt.Sprint("more", round), r.instant("more")); err != nil {
				t.Fatalf("session %d's request %d: %v", i, round+2, err)
			}
		}
	}
	for _, c := range conns {
		c.CancelAll()
	}
	for _, f := range blockers {
		f.Release()
	}
	idle(t, e)
}

// A RequestConn (one 2026 HTTP POST) has no queue places of its own: with
// the shared places full it is refused at once, while a Conn beside it
// still has its own ConnQueue places.
func TestExecutorRequestConnHasNoPlaces(t *testing.T) {
	q := newQueueRig(t, Limits{MaxQueue: 2, ConnQueue: 2})
	// MaxQueue 2 has no reserve: two POSTs fill the shared places.
	for i, want := range []*protocol.Error{nil, nil, protocol.ErrCapacity, protocol.ErrCapacity} {
		c := q.e.RequestConn()
		q.conns[fmt.Sprint("post", i)] = c
		if err := submit(c, "1", q.r.instant(fmt.Sprint("post", i))); err != want {
			t.Fatalf("POST %d = %v, want %v", i, err, want)
		}
	}
	q.run([]queueStep{{"A", false}, {"A", false}, {"A", true}})
	expectStats(t, "executor", q.e.Stats(), Stats{Running: 1, Queued: 4})
	q.end()
}
