package stdio

import (
	"runtime/debug"
	"sync"
	"time"
)

// A daemon that held a large amount of output for slow readers (answers of
// many megabytes each, docs/transport.md §11.5) keeps that memory from the
// OS after the output is written: the runtime collects garbage only as the
// program allocates, and an idle daemon allocates almost nothing, so the
// heap it grew stays resident. Once a Budget's output is back at zero after
// holding scavengeAfter or more, the runtime is asked to return what is
// free (debug.FreeOSMemory: a collection, then the free pages to the OS),
// at most once per scavengeGap, so that a daemon serving large answers all
// day pays for one collection every few seconds at most. Pools never hold
// the large buffers (giveBack, frameBuffers), so what was written is
// garbage by then.
const (
	scavengeAfter = 16 << 20
	scavengeDelay = 100 * time.Millisecond
	scavengeGap   = 10 * time.Second
)

var scavenger struct {
	mu      sync.Mutex
	last    time.Time
	pending bool
}

// requestScavenge schedules one debug.FreeOSMemory, unless one is pending.
func requestScavenge() {
	s := &scavenger
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending {
		return
	}
	s.pending = true
	delay := max(scavengeDelay, scavengeGap-time.Since(s.last))
	time.AfterFunc(delay, func() {
		debug.FreeOSMemory()
		s.mu.Lock()
		s.last, s.pending = time.Now(), false
		s.mu.Unlock()
	})
}
