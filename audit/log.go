// Package audit writes and reads snodod's audit log (docs/observability.md,
// "Audit log"): one JSON line per tools/call, resources/read and
// prompts/get, to a file rotated by size or to the systemd journal. A
// request only hands its record to a bounded queue; one writer goroutine
// encodes and writes it. When the queue is full the record is dropped and
// counted, never waited for.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
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

	// out replaces the file in tests (File is still its name).
	out io.Writer
}

// DefaultQueue is the queue's length by default: a second of a busy
// daemon's calls.
const DefaultQueue = 4096

// dropLogEvery is how often at most a drop is logged.
const dropLogEvery = time.Minute

// Log is an open audit log. RequestEnded may be called from any
// goroutine; Reopen and Close from one at a time.
type Log struct {
	o       Options
	queue   chan event
	dropped *atomic.Uint64
	lastLog atomic.Int64 // UnixNano of the last drop logged
	log     *slog.Logger

	ctl  chan chan error // Reopen's requests
	done chan struct{}   // closed when the writer has returned
	once sync.Once

	// The writer's own.
	f    *os.File
	w    *bufio.Writer
	size int64
	line bytes.Buffer
}

// event is what a request hands the writer: the RequestEnd with its
// params and clientInfo copied (the transport's buffers are reused).
type event struct {
	at     time.Time
	e      server.RequestEnd
	caller *server.Caller
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
		ctl: make(chan chan error), done: make(chan struct{})}
	if l.dropped == nil {
		l.dropped = new(atomic.Uint64)
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if o.Journald {
		if !journal.Enabled() {
			return nil, errors.New("audit.journald: the systemd journal's socket is not there (/run/systemd/journal/socket); set audit.file instead")
		}
	} else if o.out == nil {
		if err := l.open(); err != nil {
			return nil, err
		}
	} else {
		l.w = bufio.NewWriter(o.out)
	}
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
	ev := event{at: time.Now(), e: e}
	ev.e.Params = bytes.Clone(e.Params)
	if e.ClientInfo != nil {
		ev.e.ClientInfo = bytes.Clone(e.ClientInfo)
	} else if e.State != nil {
		ev.e.ClientInfo = e.State.ClientInfo() // a legacy one is never changed in place
	}
	ev.caller = e.State.Caller()
	ev.e.State = nil
	select {
	case l.queue <- ev:
	default:
		n := l.dropped.Add(1)
		now := time.Now().UnixNano()
		if last := l.lastLog.Load(); now-last >= int64(dropLogEvery) && l.lastLog.CompareAndSwap(last, now) {
			l.log.Warn("audit log queue full: records dropped (snodod_audit_dropped_total)", "dropped_total", n, "queue", cap(l.queue))
		}
	}
}

// Dropped is how many records were dropped so far.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Reopen closes the file and opens its path again (after logrotate moved
// it: docs/observability.md), once what is queued before it is written.
func (l *Log) Reopen() error {
	if l.o.Journald || l.o.out != nil {
		return nil
	}
	reply := make(chan error, 1)
	select {
	case l.ctl <- reply:
		return <-reply
	case <-l.done:
		return errors.New("audit: closed")
	}
}

// Close writes what is queued and closes the log. Requests still being
// told after Close must not be: the caller removes the Log first.
func (l *Log) Close() error {
	l.once.Do(func() { close(l.queue) })
	<-l.done
	if l.f != nil {
		return l.f.Close()
	}
	return nil
}

// write is the writer goroutine: it writes each record, flushing when
// the queue is empty.
func (l *Log) write() {
	defer close(l.done)
	for {
		select {
		case ev, ok := <-l.queue:
			if !ok {
				l.flush()
				return
			}
			l.record(&ev)
			for more := true; more; {
				select {
				case ev, ok := <-l.queue:
					if !ok {
						l.flush()
						return
					}
					l.record(&ev)
				default:
					more = false
				}
			}
			l.flush()
		case reply := <-l.ctl:
			l.flush()
			if l.f != nil {
				l.f.Close()
				l.f = nil
			}
			reply <- l.open()
		}
	}
}

// record encodes ev and writes it, rotating first when the line would
// take the file past MaxSize.
func (l *Log) record(ev *event) {
	r := l.build(ev)
	l.line.Reset()
	if err := json.NewEncoder(&l.line).Encode(r); err != nil {
		l.log.Error("audit record", "error", err)
		return
	}
	b := l.line.Bytes()
	if l.o.Journald {
		if err := journal.Send(string(bytes.TrimSuffix(b, []byte("\n"))), journal.PriInfo, map[string]string{
			"SYSLOG_IDENTIFIER": "snodod-audit", "SNODOD_SESSION": strconv.FormatUint(r.Session, 10),
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
	n, err := l.w.Write(b)
	l.size += int64(n)
	if err != nil {
		l.log.Error("audit log write", "file", l.o.File, "error", err)
	}
}

func (l *Log) flush() {
	if l.w != nil {
		if err := l.w.Flush(); err != nil {
			l.log.Error("audit log write", "file", l.o.File, "error", err)
		}
	}
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
	l.f, l.size = f, st.Size()
	if l.w == nil {
		l.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		l.w.Reset(f)
	}
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
		os.Remove(rotated(path, l.o.MaxFiles))
		for i := l.o.MaxFiles - 1; i >= 1; i-- {
			os.Rename(rotated(path, i), rotated(path, i+1))
		}
		if err := os.Rename(path, rotated(path, 1)); err != nil {
			l.log.Error("audit log rotation", "file", path, "error", err)
		}
	}
	if err := l.open(); err != nil {
		l.log.Error("audit log rotation", "error", err)
	}
}

// rotated is the name of the i-th rotation of path.
func rotated(path string, i int) string { return path + "." + strconv.Itoa(i) }

// build makes ev's record.
func (l *Log) build(ev *event) Record {
	e := &ev.e
	r := Record{Time: ev.at.UTC(), Method: e.Method, Server: e.Owner, DurationMS: float64(e.Duration.Microseconds()) / 1000}
	if c := ev.caller; c != nil {
		r.Session, r.View = c.Session, c.View
		if c.Peer.Known {
			r.Peer = &Peer{UID: c.Peer.UID, PID: c.Peer.PID, Exe: c.Peer.Exe}
		}
	}
	if len(e.ClientInfo) > 0 {
		var ci Client
		if json.Unmarshal(e.ClientInfo, &ci) == nil && ci.Name != "" {
			r.Client = &ci
		}
	}
	switch {
	case e.TimedOut:
		r.Outcome = "timed_out"
	case e.Cancelled:
		r.Outcome = "cancelled"
	case e.Err != nil:
		r.Outcome, r.Code = "error", e.Err.Code
	default:
		r.Outcome = "ok"
	}
	var p struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(e.Params) > 0 {
		_ = json.Unmarshal(e.Params, &p) // a malformed request is logged with what it has
	}
	switch e.Method {
	case "tools/call":
		r.Tool = p.Name
	case "prompts/get":
		r.Prompt = p.Name
	case "resources/read":
		r.URI = redactString(p.URI, l.o.Secrets)
		return r
	}
	if d, err := Digest(p.Arguments); err == nil {
		r.ArgsDigest = d
	}
	if l.o.Arguments && len(p.Arguments) > 0 {
		if v, err := decode(p.Arguments); err == nil {
			if b, err := canonical(redact(v, l.o.Secrets)); err == nil {
				r.Arguments = b
			}
		}
	}
	return r
}
