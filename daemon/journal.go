package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/session"
)

// A session's crash record (docs/operations.md): a memfd kept in systemd's file
// descriptor store with the session's descriptors (fdstore.go), from which
// a daemon restarted after a crash resumes the session (crash.go). It is
// mapped shared, so keeping it current costs stores to memory, no system
// call:
//
//   - the ids of the requests in flight, each in a slot of its own: the
//     id's bytes, then its length stored atomically (0: free). A request
//     costs two such stores, admitted and answered (stdio.Journal);
//   - the rest (the session's record: device, peer, terminal settings,
//     negotiated version, capabilities, subscriptions, listen streams, and
//     which descriptor is which), as JSON, rewritten when it changes
//     (rarely: an initialize, a subscription, a log level, a stream), into
//     the one of two buffers not in use, which a single atomic store then
//     makes current. A crash mid-write leaves the previous one.
//
// What was written before a crash is in the memfd whatever the moment:
// only a machine's crash loses it, and with it the sessions anyway.

const (
	journalMagic  = "SNODODJ1"
	journalFormat = 1
	// journalSize is the memfd's size. Only the pages written are
	// memory: a session with one small record and a few requests in
	// flight uses three pages.
	journalSize      = 256 << 10
	journalSlotsOff  = 4096
	journalSlots     = 256
	journalSlotSize  = 64 // 4 bytes of length, then the id's JSON
	journalBlobsOff  = journalSlotsOff + journalSlots*journalSlotSize
	journalBlobCap   = (journalSize - journalBlobsOff) / 2
	journalActiveOff = 32 // uint64: the current blob's length << 1 | which
)

// crashRecord is a journal's JSON.
type crashRecord struct {
	Format  int             `json:"format"`
	Session *session.Record `json:"session"`
	Via     string          `json:"via"`
	View    string          `json:"view,omitempty"`
	Cwd     string          `json:"cwd,omitempty"`
	// Control says the connect's control connection is stored too.
	Control bool `json:"control,omitempty"`
	// Files identify the stored descriptors: the device's, then the
	// control connection's.
	Files []fileID `json:"files"`
	// Overflow are ids in flight that had no slot (too long, or every
	// slot taken).
	Overflow []json.RawMessage `json:"overflow,omitempty"`
}

// fileID tells a stored descriptor from the others of its session, as
// systemd hands them back in an order of its own.
type fileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	Acc int    `json:"acc"` // O_ACCMODE
}

func identify(f *os.File) (fileID, error) {
	var st unix.Stat_t
	var acc int
	err := session.Control(f, func(fd int) error {
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		acc = fl & unix.O_ACCMODE
		return err
	})
	return fileID{Dev: uint64(st.Dev), Ino: st.Ino, Acc: acc}, err
}

// journal is one session's crash record, a session.Journal. Admitted and
// Answered run on the session's coordinator only (they own the slots);
// the others take mu.
type journal struct {
	f   *os.File
	mem []byte

	slots   map[protocol.ID]int32
	free    []int32
	scratch []byte

	mu      sync.Mutex
	closed  bool
	which   int // the current blob
	rec     crashRecord
	sess    *session.Session // set once made; nil: nothing to snapshot yet
	streams []server.ListenRecord
	over    map[protocol.ID]struct{}
	tooBig  bool // logged once
	onError func(error)
	fresh   bool // a new memfd: its descriptors are to be stored
}

// newJournal makes a session's record in a new memfd; base says what
// never changes (how it was connected, its descriptors).
func newJournal(id uint64, base crashRecord, onError func(error)) (*journal, error) {
	fd, err := unix.MemfdCreate(fmt.Sprintf("snodod-session-%d", id), unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for the crash record: %w", err)
	}
	f := os.NewFile(uintptr(fd), "crash record")
	j, err := mapJournal(f, base, onError)
	if err != nil {
		f.Close()
		return nil, err
	}
	j.fresh = true
	return j, nil
}

// mapJournal maps f (a new memfd, or one a predecessor used: it starts
// afresh) and writes its header.
func mapJournal(f *os.File, base crashRecord, onError func(error)) (*journal, error) {
	var mem []byte
	err := session.Control(f, func(fd int) error {
		if err := unix.Ftruncate(fd, journalSize); err != nil {
			return err
		}
		var err error
		mem, err = unix.Mmap(fd, 0, journalSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("map the crash record: %w", err)
	}
	j := &journal{f: f, mem: mem, slots: map[protocol.ID]int32{}, rec: base, over: map[protocol.ID]struct{}{}, onError: onError}
	j.rec.Format = journalFormat
	for i := journalSlots - 1; i >= 0; i-- {
		j.free = append(j.free, int32(i))
		atomic.StoreUint32(j.slotLen(int32(i)), 0)
	}
	copy(mem, journalMagic)
	binary.LittleEndian.PutUint32(mem[8:], journalFormat)
	binary.LittleEndian.PutUint32(mem[12:], journalSlots)
	binary.LittleEndian.PutUint32(mem[16:], journalSlotSize)
	binary.LittleEndian.PutUint32(mem[20:], journalBlobCap)
	return j, nil
}

func (j *journal) slotLen(i int32) *uint32 {
	return (*uint32)(unsafe.Pointer(&j.mem[journalSlotsOff+int(i)*journalSlotSize]))
}

func (j *journal) active() *uint64 { return (*uint64)(unsafe.Pointer(&j.mem[journalActiveOff])) }

// Admitted implements stdio.Journal.
func (j *journal) Admitted(id protocol.ID) {
	j.scratch = id.AppendJSON(j.scratch[:0])
	if n := len(j.scratch); n <= journalSlotSize-4 && len(j.free) > 0 {
		i := j.free[len(j.free)-1]
		j.free = j.free[:len(j.free)-1]
		off := journalSlotsOff + int(i)*journalSlotSize
		copy(j.mem[off+4:], j.scratch)
		atomic.StoreUint32(j.slotLen(i), uint32(n))
		j.slots[id] = i
		return
	}
	j.mu.Lock()
	j.over[id] = struct{}{}
	j.writeLocked()
	j.mu.Unlock()
}

// Answered implements stdio.Journal.
func (j *journal) Answered(id protocol.ID) {
	if i, ok := j.slots[id]; ok {
		atomic.StoreUint32(j.slotLen(i), 0)
		delete(j.slots, id)
		j.free = append(j.free, i)
		return
	}
	j.mu.Lock()
	if _, ok := j.over[id]; ok {
		delete(j.over, id)
		j.writeLocked()
	}
	j.mu.Unlock()
}

// Streams implements stdio.Journal.
func (j *journal) Streams(open []server.ListenRecord) {
	j.mu.Lock()
	j.streams = open
	j.writeLocked()
	j.mu.Unlock()
}

// StateChanged implements session.Journal: the record is written again.
func (j *journal) StateChanged() {
	j.mu.Lock()
	j.writeLocked()
	j.mu.Unlock()
}

// attach gives the journal its session and writes the first record.
func (j *journal) attach(s *session.Session) {
	j.mu.Lock()
	j.sess = s
	j.writeLocked()
	j.mu.Unlock()
}

// writeLocked writes the record into the blob not in use, then makes it
// current; mu is held.
func (j *journal) writeLocked() {
	if j.closed || j.sess == nil {
		return
	}
	rec, err := j.sess.Snapshot()
	if err != nil {
		j.fail(err)
		return
	}
	rec.Streams = j.streams
	j.rec.Session = rec
	j.rec.Overflow = j.rec.Overflow[:0]
	for id := range j.over {
		j.rec.Overflow = append(j.rec.Overflow, id.AppendJSON(nil))
	}
	b, err := json.Marshal(&j.rec)
	if err != nil {
		j.fail(err)
		return
	}
	if len(b) > journalBlobCap {
		j.fail(fmt.Errorf("the crash record is %d bytes, over %d", len(b), journalBlobCap))
		return
	}
	next := 1 - j.which
	copy(j.mem[journalBlobsOff+next*journalBlobCap:], b)
	atomic.StoreUint64(j.active(), uint64(len(b))<<1|uint64(next))
	j.which = next
}

func (j *journal) fail(err error) {
	if !j.tooBig {
		j.tooBig = true
		if j.onError != nil {
			j.onError(err)
		}
	}
}

// close unmaps the record and closes the memfd (the store keeps its own).
// The session's coordinator has returned by then.
func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	j.closed = true
	_ = unix.Munmap(j.mem)
	j.f.Close()
}

// errNotJournal is readJournal's error for a descriptor that is no crash
// record.
var errNotJournal = errors.New("not a snodod crash record")

// readJournal reads a crash record left by a predecessor: the record and
// the ids that were in flight.
func readJournal(f *os.File) (*crashRecord, []json.RawMessage, error) {
	buf := make([]byte, journalSize)
	n, err := f.ReadAt(buf, 0)
	if n < journalBlobsOff || (err != nil && n < len(buf)) {
		return nil, nil, errNotJournal
	}
	if string(buf[:8]) != journalMagic {
		return nil, nil, errNotJournal
	}
	if v := binary.LittleEndian.Uint32(buf[8:]); v != journalFormat {
		return nil, nil, fmt.Errorf("crash record of format %d, this daemon reads %d", v, journalFormat)
	}
	active := binary.LittleEndian.Uint64(buf[journalActiveOff:])
	length, which := int(active>>1), int(active&1)
	if length == 0 || length > journalBlobCap {
		return nil, nil, errors.New("the crash record holds no session")
	}
	off := journalBlobsOff + which*journalBlobCap
	var rec crashRecord
	if err := json.Unmarshal(buf[off:off+length], &rec); err != nil || rec.Session == nil {
		return nil, nil, fmt.Errorf("the crash record does not decode: %v", err)
	}
	lost := append([]json.RawMessage(nil), rec.Overflow...)
	for i := range journalSlots {
		o := journalSlotsOff + i*journalSlotSize
		if l := int(binary.LittleEndian.Uint32(buf[o:])); l > 0 && l <= journalSlotSize-4 {
			lost = append(lost, json.RawMessage(append([]byte(nil), buf[o+4:o+4+l]...)))
		}
	}
	return &rec, lost, nil
}

var _ session.Journal = (*journal)(nil)
