// Package audit writes and reads snodod's audit log (docs/observability.md,
// "Audit log"): one JSON line per tools/call, resources/read and
// prompts/get, to a file rotated by size or to the systemd journal. A
// request only hands its record to a bounded queue; one writer goroutine
// encodes and writes the queue's records in batches, at most FlushEvery
// after the first of them arrived. When the queue is full the record is
// dropped and counted, never waited for.
package audit

import (
	"bytes"
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
	o       Options
	queue   chan event
	pending atomic.Bool   // the writer was woken for the queue's records
	wake    chan struct{} // the first record after a pause
	urgent  chan struct{} // the queue is half full
	dropped *atomic.Uint64
	lastLog atomic.Int64 // UnixNano of the last drop logged
	log     *slog.Logger

	ctl     chan ctlRequest // Reopen's and Sync's requests
	closing chan struct{}   // Close's
	done    chan struct{}   // closed when the writer has returned
	once    sync.Once

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

// event is what a request hands the writer: the RequestEnd with its
// params and a 2026 clientInfo copied (the transport's buffers are
// reused); without one, e.State is kept for the writer to read the
// session's.
type event struct {
	at     time.Time
	e      server.RequestEnd
	caller *server.Caller
	peer   server.Peer
}

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
	l := &Log{o: o, queue: make(chan event, o.Queue), dropped: o.Dropped, log: o.Logger,
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

// RequestEnded queues the record of an audited request, or counts it
// dropped when the queue is full: it never blocks.
func (l *Log) RequestEnded(e server.RequestEnd) {
	if !Audited(e.Method) {
		return
	}
	at := e.End
	if at.IsZero() {
		at = time.Now()
	}
	ev := event{at: at, e: e, caller: e.State.Caller(), peer: e.State.Peer()}
	ev.e.Params = bytes.Clone(e.Params)
	if e.ClientInfo != nil {
		ev.e.ClientInfo = bytes.Clone(e.ClientInfo)
		ev.e.State = nil
	} // else the writer asks the state for the legacy initialize's (under its lock: not here)
	select {
	case l.queue <- ev:
		if !l.pending.Load() && l.pending.CompareAndSwap(false, true) {
			signal(l.wake)
		} else if len(l.queue) >= cap(l.queue)/2 {
			signal(l.urgent)
		}
	default:
		n := l.dropped.Add(1)
		signal(l.urgent)
		now := time.Now().UnixNano()
		if last := l.lastLog.Load(); now-last >= int64(dropLogEvery) && l.lastLog.CompareAndSwap(last, now) {
			l.log.Warn("audit log queue full: records dropped (snodod_audit_dropped_total)", "dropped_total", n, "queue", cap(l.queue))
		}
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
	for {
		select {
		case ev := <-l.queue:
			l.record(&ev)
			continue
		default:
		}
		break
	}
	l.flush()
}

// record encodes ev and writes it, rotating first when the line would
// take the file past MaxSize.
func (l *Log) record(ev *event) {
	l.line = l.enc.appendRecord(l.line[:0], ev)
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
const writeBytes = 64 << 10

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
