package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

// A session can continue in another process (docs/operations.md):
// a daemon upgrade hands every session to the new binary, and after a crash
// a new daemon resumes the sessions whose descriptors systemd kept. What
// crosses is a Record, plain data in JSON, and the device's descriptors;
// the device stays as the session left it (a terminal in raw mode, every
// descriptor non-blocking), and the successor restores it when the session
// finally ends.

// ErrNotHandedOver is HandOver's error for a session that ended, or was
// being killed, before it could be handed over.
var ErrNotHandedOver = errors.New("session ended before it could be handed over")

// Record is a session as its successor continues it. Descriptors are not in
// it: they travel beside it, in the order DeviceRecord.Files says.
type Record struct {
	ID      uint64    `json:"id"`
	Started time.Time `json:"started"`
	// Requests and Restarts continue the session's counters.
	Requests int64        `json:"requests,omitempty"`
	Restarts int64        `json:"restarts,omitempty"`
	Device   DeviceRecord `json:"device"`
	// Input is what the session read and did not handle (docs/transport.md
	// §3: the next byte the successor handles is the next the session
	// would have).
	Input   stdio.Carry            `json:"input"`
	State   server.SessionSnapshot `json:"state"`
	Streams []server.ListenRecord  `json:"streams,omitempty"`
	// Lost are the ids of requests admitted and never answered: set after
	// a crash, from the session's crash record (daemon/journal.go).
	Lost []json.RawMessage `json:"lost,omitempty"`
}

// DeviceRecord is a Device as plain data.
type DeviceRecord struct {
	Kind Kind `json:"kind"`
	Peer Peer `json:"peer"`
	// Files is 1 when one descriptor serves both ways, else 2 (input,
	// output).
	Files int `json:"files"`
	// TTYs are the terminals the device made raw, by file index, with the
	// settings to restore when the session ends.
	TTYs []TTYRecord `json:"ttys,omitempty"`
	// Blocking are the file indexes whose descriptions were blocking when
	// the client handed them over (they are given that mode back at the
	// end).
	Blocking []int `json:"blocking,omitempty"`
	// BytesOut continues the device's output counter.
	BytesOut int64 `json:"bytesOut,omitempty"`
}

// TTYRecord is one terminal of a DeviceRecord.
type TTYRecord struct {
	File    int          `json:"file"`
	Termios unix.Termios `json:"termios"`
}

// Record returns the device as plain data and its descriptors, which stay
// the device's: the caller passes duplicates on (SCM_RIGHTS duplicates
// them), never closes these. It fails for a terminal whose settings could
// not be read when it was made raw (on systems other than Linux).
func (d *Device) Record() (DeviceRecord, []*os.File, error) {
	files := d.Files()
	rec := DeviceRecord{Kind: d.kind, Peer: d.peer, Files: len(files), BytesOut: d.bytesOut.Load()}
	index := func(f *os.File) int {
		for i, g := range files {
			if g == f {
				return i
			}
		}
		return -1
	}
	for _, t := range d.ttys {
		if t.orig == nil {
			return DeviceRecord{}, nil, fmt.Errorf("session: the settings of terminal %s cannot be handed over", t.f.Name())
		}
		rec.TTYs = append(rec.TTYs, TTYRecord{File: index(t.f), Termios: *t.orig})
	}
	for _, f := range d.blocking {
		rec.Blocking = append(rec.Blocking, index(f))
	}
	return rec, files, nil
}

// RestoreDevice continues, in this process, the device rec describes on
// files (its descriptors, received from the previous process in rec's
// order); it takes ownership of files. Nothing is changed on the
// descriptors but their registration with Go's poller: a terminal stays
// raw, and Close restores what rec says the client's were.
func RestoreDevice(files []*os.File, rec DeviceRecord) (_ *Device, err error) {
	if len(files) != rec.Files || rec.Files < 1 || rec.Files > 2 {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("session: a device record of %d descriptors came with %d", rec.Files, len(files))
	}
	d := &Device{kind: rec.Kind, peer: rec.Peer}
	d.bytesOut.Store(rec.BytesOut)
	adopted := make([]*os.File, 0, len(files))
	defer func() {
		if err != nil {
			for _, f := range adopted {
				f.Close()
			}
		}
	}()
	for i, f := range files {
		// A received descriptor is non-blocking already (the description
		// is shared); wrapping it anew registers it with the poller.
		nf, _, err := reopenNonblocking(f)
		if err != nil {
			for _, g := range files[i+1:] {
				g.Close()
			}
			return nil, err
		}
		adopted = append(adopted, nf)
	}
	d.in, d.out = adopted[0], adopted[len(adopted)-1]
	for _, t := range rec.TTYs {
		if t.File < 0 || t.File >= len(adopted) {
			return nil, fmt.Errorf("session: a terminal record names file %d of %d", t.File, len(adopted))
		}
		orig := t.Termios
		d.ttys = append(d.ttys, ttyState{f: adopted[t.File], orig: &orig})
		if t.File == 0 {
			d.inTTY = true
		}
	}
	for _, i := range rec.Blocking {
		if i < 0 || i >= len(adopted) {
			return nil, fmt.Errorf("session: a blocking record names file %d of %d", i, len(adopted))
		}
		d.blocking = append(d.blocking, adopted[i])
	}
	return d, nil
}

// handoverResult is what Serve gives HandOver.
type handoverResult struct {
	rec   *Record
	files []*os.File
	err   error
}

// HandOver pauses the session so that another process can continue it
// (stdio.ErrHandOver: reading stops, in-flight requests finish within
// Limits.UpgradeGrace or are answered "snodod restarted; this request was
// cancelled"), and returns its Record and its device's descriptors. The
// session has then ended (Reason is "handed over") without closing its
// device: the descriptors are the caller's to pass on and then close,
// and nothing is restored on them. HandOver returns ErrNotHandedOver when
// the session ends otherwise first (end of input does not count: the end
// is handed over too), and ctx's error when ctx ends first (the hand-over
// goes on; the session then ends when it completes, and its descriptors
// are closed without restoring anything).
func (s *Session) HandOver(ctx context.Context) (*Record, []*os.File, error) {
	s.mu.Lock()
	if s.ended || s.killed != nil || s.handover != nil {
		s.mu.Unlock()
		return nil, nil, ErrNotHandedOver
	}
	result := make(chan handoverResult, 1)
	s.handover = result
	if s.cancel != nil {
		s.cancel(stdio.ErrHandOver)
	}
	s.mu.Unlock()
	select {
	case r := <-result:
		return r.rec, r.files, r.err
	case <-s.done:
		select {
		case r := <-result:
			return r.rec, r.files, r.err
		default:
			return nil, nil, ErrNotHandedOver
		}
	case <-ctx.Done():
		go func() {
			if r := <-result; r.err == nil {
				for _, f := range r.files {
					f.Close()
				}
			}
		}()
		return nil, nil, ctx.Err()
	}
}

// handingOver reports whether HandOver was asked for.
func (s *Session) handingOver() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handover != nil
}

// handedOver completes a hand-over once the transport has paused: the
// Reader is detached and the record made. A Reader that cannot be detached
// ends the session as usual (the device is closed).
func (s *Session) handedOver(streams []server.ListenRecord) {
	s.mu.Lock()
	result, reader := s.handover, s.ownReader
	s.mu.Unlock()
	r := handoverResult{}
	carry, err := reader.Detach()
	var dev DeviceRecord
	var files []*os.File
	if err == nil {
		dev, files, err = s.dev.Record()
	}
	if err != nil {
		s.log.Error("session cannot be handed over; ending it", "err", err)
		r.err = fmt.Errorf("%w: %w", ErrNotHandedOver, err)
		s.end(nil)
		result <- r
		return
	}
	r.rec = s.record(dev, carry)
	r.rec.Streams = streams
	r.files = files
	s.mu.Lock()
	s.moved = true
	s.mu.Unlock()
	s.end(nil)
	result <- r
}

// resumeState is what the first instance of a resumed session is given.
type resumeState struct {
	input   stdio.Carry
	streams []server.ListenRecord
	lost    []json.RawMessage
}

// Resume continues the session rec describes, on files (its descriptors,
// received with it), with cfg: the session has rec's id, start, counters,
// runtime state and unread input, reopens its listen streams and first
// answers rec.Lost. It takes ownership of files. Serve it as any session.
// A runtime state that cannot be restored is logged and the session goes
// on as a fresh connection.
func Resume(rec *Record, files []*os.File, cfg Config) (*Session, error) {
	dev, err := RestoreDevice(files, rec.Device)
	if err != nil {
		return nil, err
	}
	s := New(rec.ID, dev, cfg)
	s.started = rec.Started
	s.restarts.Store(rec.Restarts)
	s.counters.Restore(rec.Requests)
	if err := s.rt.Restore(rec.State, cfg.Dispatcher); err != nil {
		s.log.Warn("the session's runtime state cannot be restored; it goes on as a new connection", "err", err)
	}
	s.resume = &resumeState{input: rec.Input, streams: rec.Streams, lost: rec.Lost}
	return s, nil
}

// transport is what the transport's first instance is given.
func (r *resumeState) transport(log *slog.Logger) *stdio.Resume {
	tr := &stdio.Resume{Streams: r.streams}
	for _, raw := range r.lost {
		id, ok := protocol.ParseID(raw)
		if !ok {
			log.Warn("a lost request's id is not an id; it cannot be answered", "id", string(raw))
			continue
		}
		tr.Lost = append(tr.Lost, id)
	}
	return tr
}

// Snapshot returns the session's record as a crash would leave it to a
// successor: the device, the counters and the runtime state, with no unread
// input (a crash loses what was read and not handled) and no streams (the
// Journal hears of those from the transport). It may be called from any
// goroutine while the session runs.
func (s *Session) Snapshot() (*Record, error) {
	dev, _, err := s.dev.Record()
	if err != nil {
		return nil, err
	}
	return s.record(dev, stdio.Carry{BytesIn: s.bytesIn()}), nil
}

// record is the session's Record on dev with input, without streams or
// lost requests: what HandOver and Snapshot share.
func (s *Session) record(dev DeviceRecord, input stdio.Carry) *Record {
	return &Record{
		ID: s.id, Started: s.started, Requests: s.counters.Requests(), Restarts: s.restarts.Load(),
		Device: dev, Input: input, State: s.rt.Snapshot(),
	}
}

// Files returns the device's descriptors, in the order of its record: the
// session keeps them (a caller passes duplicates on, never closes these).
func (s *Session) Files() []*os.File { return s.dev.Files() }
