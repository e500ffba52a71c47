package stdio_test

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

// recordingJournal is a stdio.Journal that keeps what it was told.
type recordingJournal struct {
	mu       sync.Mutex
	inFlight map[protocol.ID]bool
	events   []string
	streams  int
}

func (j *recordingJournal) Admitted(id protocol.ID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inFlight[id] = true
	j.events = append(j.events, "admitted "+id.String())
}

func (j *recordingJournal) Answered(id protocol.ID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.inFlight, id)
	j.events = append(j.events, "answered "+id.String())
}

func (j *recordingJournal) Streams(open []server.ListenRecord) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.streams = len(open)
}

func (j *recordingJournal) has(id protocol.ID) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.inFlight[id]
}

// The journal holds an id from its admission until its answer is written,
// releases a cancelled one at once, and hears of every listen stream.
func TestJournalHooks(t *testing.T) {
	ep := pipes(t)
	defer ep.closeAll()
	release := make(chan struct{})
	j := &recordingJournal{inFlight: map[protocol.ID]bool{}}
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: handoffServer(t, release), Journal: j}
	r := newLineSource(ep.r)
	served := make(chan error, 1)
	go func() { served <- tr.Serve(context.Background()) }()

	io.WriteString(ep.w, call(1, "slow", `{}`)+"\n"+call(2, "stuck", `{}`)+"\n")
	eventually.True(t, "1 and 2 journaled", func() bool { return j.has(idOf(1)) && j.has(idOf(2)) })
	io.WriteString(ep.w, cancelReq("2")+"\n")
	eventually.True(t, "2 out of the journal", func() bool { return !j.has(idOf(2)) })
	close(release)
	r.next(t) // the answer to 1: written, then released
	eventually.True(t, "1 out of the journal", func() bool { return !j.has(idOf(1)) })
	io.WriteString(ep.w, req("L", "subscriptions/listen", `{"notifications":{"toolsListChanged":true}}`)+"\n")
	r.next(t) // the acknowledgement
	eventually.True(t, "the stream journaled", func() bool { j.mu.Lock(); defer j.mu.Unlock(); return j.streams == 1 })
	io.WriteString(ep.w, cancelReq(`"L"`)+"\n")
	eventually.True(t, "the stream out of the journal", func() bool { j.mu.Lock(); defer j.mu.Unlock(); return j.streams == 0 })
	ep.closeInput()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, want := range []string{"admitted 1", "admitted 2", "answered 2", "answered 1", `admitted "L"`, `answered "L"`} {
		if !slices.Contains(j.events, want) {
			t.Errorf("journal events %q lack %q", j.events, want)
		}
	}
	if len(j.inFlight) != 0 {
		t.Errorf("still in flight at the end: %v", j.inFlight)
	}
}
