// Package audit writes and reads snodod's audit log (docs/observability.md,
// "Audit log"): one JSON line per tools/call, resources/read and
// prompts/get, to a file rotated by size or to the systemd journal. A
// request only hands its record to a bounded queue; one writer goroutine
// encodes and writes the queue's records in batches, at most FlushEvery
// after the first of them arrived. When the queue is full the record is
// dropped and counted, never waited for.
package audit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/journal"

	"github.com/snodod/snodod/server"
)

// Options configure a Log.
type Options struct {
	// File is the log's path; Journald sends the lines to the journal
	// instead. Exactly one is set.
	File     string
	Journald bool
	// MaxSize is the size in bytes past which the file is rotated;
	// MaxFiles the rotated files kept (FILE.1 the newest).
	MaxSize  int64
	MaxFiles int
	// Arguments records the arguments, redacted, besides their digest;
	// Secrets are the values redacted wherever they appear (config's
	// SecretValues: longest first).
	Arguments bool
	Secrets   []string
	// Queue is how many records wait for the writer; 0: DefaultQueue.
	Queue int
	// Dropped counts the records dropped because the queue was full;
	// nil: the Log's own. (The daemon keeps one across reloads.)
	Dropped *atomic.Uint64
	Logger  *slog.Logger

	// out replaces the file in tests (File is still its name); stall,
	// when set, is called by the writer before each batch.
	out   io.Writer
	stall func()
}

// DefaultQueue is the queue's length by default: far more than the calls
// of FlushEvery on a busy daemon.
const DefaultQueue = 8192

// FlushEvery is how long at most a record waits in the queue: the writer
// wakes at the first record after a pause, and writes what came
// meanwhile this long after it (or at once when the queue is half full).
// One wake-up and one write for many records is what makes a record cheap.
const FlushEvery = 50 * time.Millisecond

// dropLogEvery is how often at most a drop is logged.
const dropLogEvery = time.Minute

// Log is an open audit log. RequestEnded may be called from any
// goroutine; Reopen, Sync and Close from one at a time.
type Log struct {
	o Options
	// The queue: the records waiting for the writer and their bytes (a
	// request's params and 2026 clientInfo), appended under mu. The
	// writer swaps them for the spare pair it has written: no channel
	// send, no allocation per record (once the slices have grown), and
	// few pointers for the collector to scan.
	mu       sync.Mutex
	fill     []record
	arena    []byte
	pending  atomic.Bool   // the writer was woken for the queue's records
	wake     chan struct{} // the first record after a pause
	urgent   chan struct{} // the queue is half full
	dropped  *atomic.Uint64
	lastLog  atomic.Int64 // UnixNano of the last drop logged
	log      *slog.Logger
	ctl      chan ctlRequest // Reopen's and Sync's requests
	closing  chan struct{}   // Close's
	done     chan struct{}   // closed when the writer has returned
	once     sync.Once
	spare    []record // the writer's, written, given back at the next swap
	spareBuf []byte

	// The writer's own.
	f     *os.File
	w     io.Writer // the file (or Options.out); nil when it could not be opened
	buf   []byte    // whole lines not written yet
	size  int64
	line  []byte
	enc   encoder
	timer *time.Timer
}

// ctlRequest asks the writer to reopen the file (reopen) or only to
// have written what was queued before it.
type ctlRequest struct {
	reopen bool
	reply  chan error
}

// record is what a request hands the writer: what its line needs of
// the RequestEnd, its params and a 2026 clientInfo copied into the
// queue's arena (the transport's buffers are reused); without one,
// state is kept for the writer to read the session's.
type record struct {
	at, dur int64 // the end (UnixNano) and the duration
	code    int64 // the error's, with outcome outcomeError
	caller  *server.Caller
	peer    server.Peer
	state   *server.SessionState
	owner   string
	params  span
	info    span // the 2026 clientInfo, with hasInfo
	method  method
	outcome outcome
	hasInfo bool
}

// span is a part of the queue's arena.
type span struct{ off, end int }

func (s span) of(arena []byte) []byte { return arena[s.off:s.end] }

// method is an audited method.
type method uint8

const (
	notAudited method = iota
	toolsCall
	resourcesRead
	promptsGet
)

var methodNames = [...]string{toolsCall: "tools/call", resourcesRead: "resources/read", promptsGet: "prompts/get"}

func methodOf(m string) method {
	switch m {
	case "tools/call":
		return toolsCall
	case "resources/read":
		return resourcesRead
	case "prompts/get":
		return promptsGet
	}
	return notAudited
}

// outcome is a record's outcome.
type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeError
	outcomeCancelled
	outcomeTimedOut
)

// Open opens the log (creating the file, mode 0600, or checking the
// journal) and starts its writer.
func Open(o Options) (*Log, error) {
	if o.File == "" && !o.Journald {
		return nil, errors.New("audit: neither a file nor journald")
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.MaxFiles < 0 {
		o.MaxFiles = 0
	}
	l := &Log{o: o, dropped: o.Dropped, log: o.Logger,
		wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
		ctl: make(chan ctlRequest), closing: make(chan struct{}), done: make(chan struct{})}
	l.enc.secrets, l.enc.arguments = o.Secrets, o.Arguments
	if l.dropped == nil {
		l.dropped = new(atomic.Uint64)
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	switch {
	case o.Journald:
		if !journal.Enabled() {
			return nil, errors.New("audit.journald: the systemd journal's socket is not there (/run/systemd/journal/socket); set audit.file instead")
		}
	case o.out != nil:
		l.w = o.out
	default:
		if err := l.open(); err != nil {
			return nil, err
		}
	}
	l.timer = time.NewTimer(FlushEvery)
	l.timer.Stop()
	go l.write()
	return l, nil
}

// Audited reports whether method's requests are audited.
func Audited(method string) bool {
	return method == "tools/call" || method == "resources/read" || method == "prompts/get"
}

// newRecord is e's record but for its bytes (addBytes).
func newRecord(e *server.RequestEnd, m method) record {
	r := record{dur: int64(e.Duration), caller: e.State.Caller(), peer: e.State.Peer(), owner: e.Owner, method: m}
	if e.End.IsZero() {
		r.at = time.Now().UnixNano()
	} else {
		r.at = e.End.UnixNano()
	}
	switch {
	case e.TimedOut:
		r.outcome = outcomeTimedOut
	case e.Cancelled:
		r.outcome = outcomeCancelled
	case e.Err != nil:
		r.outcome, r.code = outcomeError, e.Err.Code
	}
	if e.ClientInfo != nil {
		r.hasInfo = true
	} else {
		r.state = e.State // the writer asks the state for the legacy initialize's (under its lock: not here)
	}
	return r
}

// addBytes copies e's params and 2026 clientInfo into arena, for r.
func (r *record) addBytes(e *server.RequestEnd, arena []byte) []byte {
	r.params.off = len(arena)
	arena = append(arena, e.Params...)
	r.params.end = len(arena)
	if r.hasInfo {
		r.info.off = len(arena)
		arena = append(arena, e.ClientInfo...)
		r.info.end = len(arena)
	}
	return arena
}

// RequestEnded queues the record of an audited request, or counts it
// dropped when the queue is full: it never blocks (but for the queue's
// lock, held to append one record).
func (l *Log) RequestEnded(e server.RequestEnd) {
	m := methodOf(e.Method)
	if m == notAudited {
		return
	}
	r := newRecord(&e, m)
	l.mu.Lock()
	if len(l.fill) >= l.o.Queue {
		l.mu.Unlock()
		n := l.dropped.Add(1)
		signal(l.urgent)
		now := time.Now().UnixNano()
		if last := l.lastLog.Load(); now-last >= int64(dropLogEvery) && l.lastLog.CompareAndSwap(last, now) {
			l.log.Warn("audit log queue full: records dropped (snodod_audit_dropped_total)", "dropped_total", n, "queue", l.o.Queue)
		}
		return
	}
	l.arena = r.addBytes(&e, l.arena)
	l.fill = append(l.fill, r)
	n := len(l.fill)
	l.mu.Unlock()
	if !l.pending.Load() && l.pending.CompareAndSwap(false, true) {
		signal(l.wake)
	} else if n >= l.o.Queue/2 {
		signal(l.urgent)
	}
}

// signal wakes whoever waits on c, without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Dropped is how many records were dropped so far.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Reopen closes the file and opens its path again (after logrotate moved
// it: docs/observability.md), once what was queued before is written.
func (l *Log) Reopen() error {
	if l.o.Journald || l.o.out != nil {
		return l.Sync()
	}
	return l.ask(true)
}

// Sync returns once what was queued before it is written (flushed to the
// file, sent to the journal).
func (l *Log) Sync() error { return l.ask(false) }

func (l *Log) ask(reopen bool) error {
	reply := make(chan error, 1)
	select {
	case l.ctl <- ctlRequest{reopen, reply}:
		return <-reply
	case <-l.done:
		return errors.New("audit: closed")
	}
}

// Close writes what is queued and closes the log. A record queued after
// Close is lost: the caller stops telling the Log first.
func (l *Log) Close() error {
	l.once.Do(func() { close(l.closing) })
	<-l.done
	if l.f != nil {
		return l.f.Close()
	}
	return nil
}

// write is the writer goroutine.
func (l *Log) write() {
	defer close(l.done)
	for {
		select {
		case <-l.wake:
			// Let the batch gather, unless asked for it.
			l.timer.Reset(FlushEvery)
			select {
			case <-l.timer.C:
			case <-l.urgent:
				l.timer.Stop()
			case req := <-l.ctl:
				l.timer.Stop()
				l.serve(req)
			case <-l.closing:
				l.timer.Stop()
				l.drain()
				return
			}
			l.drain()
		case <-l.urgent:
			l.drain()
		case req := <-l.ctl:
			l.serve(req)
		case <-l.closing:
			l.drain()
			return
		}
	}
}

// serve answers a Sync or a Reopen.
func (l *Log) serve(req ctlRequest) {
	l.drain()
	if !req.reopen {
		req.reply <- nil
		return
	}
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	req.reply <- l.open()
}

// drain writes every record queued and flushes them.
func (l *Log) drain() {
	if l.o.stall != nil {
		l.o.stall()
	}
	l.pending.Store(false) // a record queued from now on wakes the writer again
	l.mu.Lock()
	recs, arena := l.fill, l.arena
	l.fill, l.arena = l.spare[:0], l.spareBuf[:0]
	l.mu.Unlock()
	for i := range recs {
		l.record(&recs[i], arena)
	}
	l.flush()
	clear(recs) // let go of their sessions
	if cap(arena) > keepArena {
		arena = nil // a burst of large params: not kept for ever
	}
	l.spare, l.spareBuf = recs[:0], arena[:0]
}

// keepArena is the most of a queue's arena kept from one batch to the
// next.
const keepArena = 1 << 20

// record encodes r (its bytes in arena) and writes it, rotating first
// when the line would take the file past MaxSize.
func (l *Log) record(r *record, arena []byte) {
	l.line = l.enc.appendRecord(l.line[:0], r, arena)
	b := l.line
	if l.o.Journald {
		if err := journal.Send(string(b[:len(b)-1]), journal.PriInfo, map[string]string{
			"SYSLOG_IDENTIFIER": "snodod-audit",
		}); err != nil {
			l.log.Error("audit log to journald", "error", err)
		}
		return
	}
	if l.w == nil {
		return // the file could not be opened again; logged then
	}
	if l.o.MaxSize > 0 && l.size > 0 && l.size+int64(len(b)) > l.o.MaxSize && l.o.out == nil {
		l.rotate()
		if l.w == nil {
			return
		}
	}
	if len(l.buf) > 0 && len(l.buf)+len(b) > writeBytes {
		l.flush()
	}
	l.buf = append(l.buf, b...)
	l.size += int64(len(b))
}

// writeBytes is how much a write holds at most (unless one line is
// longer): whole lines only, so that a reader, or another process
// appending to the file during an upgrade, never sees half of one.
const writeBytes = 256 << 10

// flush writes the lines held, in one write.
func (l *Log) flush() {
	if len(l.buf) == 0 {
		return
	}
	if l.w != nil {
		if _, err := l.w.Write(l.buf); err != nil {
			l.log.Error("audit log write", "file", l.o.File, "error", err)
		}
	}
	l.buf = l.buf[:0]
}

// open opens the file for appending, mode 0600, and learns its size.
func (l *Log) open() error {
	f, err := os.OpenFile(l.o.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		l.w = nil
		return fmt.Errorf("audit.file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		l.w = nil
		return fmt.Errorf("audit.file: %w", err)
	}
	l.f, l.w, l.size = f, f, st.Size()
	return nil
}

// rotate closes the file, shifts FILE.N-1 … FILE.1 to FILE.N … FILE.2
// (FILE.MaxFiles removed), FILE to FILE.1, and opens a new FILE. With
// MaxFiles 0 the file is removed instead.
func (l *Log) rotate() {
	l.flush()
	l.f.Close()
	l.f = nil
	path := l.o.File
	if l.o.MaxFiles == 0 {
		os.Remove(path)
	} else {
		os.Remove(Rotated(path, l.o.MaxFiles))
		for i := l.o.MaxFiles - 1; i >= 1; i-- {
			os.Rename(Rotated(path, i), Rotated(path, i+1))
		}
		if err := os.Rename(path, Rotated(path, 1)); err != nil {
			l.log.Error("audit log rotation", "file", path, "error", err)
		}
	}
	if err := l.open(); err != nil {
		l.log.Error("audit log rotation", "error", err)
	}
}

// Rotated is the name of the i-th rotation of path: path.i, 1 the newest.
func Rotated(path string, i int) string { return path + "." + strconv.Itoa(i) }
