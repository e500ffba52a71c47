package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/internal/proc"
)

// A Conn to a child started with Command.Kept can be handed over to
// another process, the daemon an upgrade starts (docs/operations.md,
// "Upgrading"): HandOver stops this process's use of it without ending the
// child, and returns what the other process needs to go on speaking to it
// (Adopt) without a second initialize, which an MCP server must never be
// sent: the handshake's results, the next request id, the child's pid,
// start time and group marker, and duplicates of its three pipes.

// ErrHandedOver is how a Conn that was handed over ended, in this process.
var ErrHandedOver = errors.New("handed over to another process (an upgrade)")

// ErrBusy refuses a hand-over of a Conn with calls or requests of the
// server's in flight, or one whose transport is not a kept child.
var ErrBusy = errors.New("the connection is busy or not a kept child; it cannot be handed over")

// HandedOver is a Conn handed over: what Adopt needs, besides the
// descriptors (the child's stdin, stdout and stderr, in that order).
type HandedOver struct {
	Era          string          `json:"era"`
	Version      string          `json:"version"`
	ServerInfo   json.RawMessage `json:"server_info,omitempty"`
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	// NextID is the last request id used: the adopter's ids follow it, so
	// that a late answer to an old request is never taken for a new one's.
	NextID int64 `json:"next_id"`
	// PID, StartTime and Marker name the child's process group
	// (proc.Adopt).
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Marker    string `json:"marker"`
}

// HandOver stops this process's use of c, a Conn whose transport is a
// Command started with Kept, when nothing is in flight on it: no call
// waits for its answer, no request of the server's waits for one. The
// child is neither signalled nor sent anything; its pipes stay open
// through the duplicates returned (the caller owns them), and c ends
// with ErrHandedOver. Bytes the server wrote that c had read but not yet
// routed are lost: with nothing in flight, at most a notification. On
// ErrBusy c goes on as before.
func (c *Conn) HandOver() (*HandedOver, []*os.File, error) {
	p, ok := c.s.(*process)
	c.mu.Lock()
	if !ok || !p.cmd.Kept || c.closing || len(c.calls) > 0 || len(c.incoming) > 0 {
		c.mu.Unlock()
		return nil, nil, ErrBusy
	}
	c.closing = true // no new calls
	c.mu.Unlock()
	files, err := p.handOver()
	if err != nil {
		c.mu.Lock()
		c.closing = false
		c.mu.Unlock()
		return nil, nil, err
	}
	<-c.done
	if !errors.Is(c.Err(), ErrHandedOver) {
		closeAll(files)
		return nil, nil, fmt.Errorf("the server ended during the hand-over: %w", c.Err())
	}
	h := &HandedOver{Era: c.era, Version: c.version, ServerInfo: c.serverInfo, Capabilities: c.caps,
		Instructions: c.instructions, NextID: c.nextID.Load(),
		PID: p.group.PID(), StartTime: p.group.StartTime(), Marker: p.group.Marker()}
	return h, files, nil
}

// handOver duplicates the pipes and stops the process's goroutines without
// closing the child's ends: supervise then releases the process (release)
// instead of stopping the child.
func (p *process) handOver() ([]*os.File, error) {
	if p.w.busyOrQueued() {
		return nil, ErrBusy
	}
	var files []*os.File
	for _, f := range []*os.File{p.w.f, p.stdout, p.stderr} {
		dup, err := dupFile(f)
		if err != nil {
			closeAll(files)
			return nil, fmt.Errorf("hand over: %w", err)
		}
		files = append(files, dup)
	}
	if !p.handedOver.CompareAndSwap(false, true) {
		closeAll(files)
		return nil, ErrBusy
	}
	p.stopReading()
	_ = p.stderr.SetReadDeadline(time.Now())
	return files, nil
}

// release ends a process handed over, on supervise's goroutine, once
// stdout's reading has stopped: its own ends of the pipes are closed
// (the duplicates keep them open), its group forgotten by the record (the
// adopter records it), and the child left running.
func (p *process) release() {
	<-p.stderrDone
	p.w.close() // closes this process's stdin end only: the duplicate keeps it open
	<-p.w.done
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	if p.cmd.Record != nil {
		if err := p.cmd.Record.Remove(p.group); err != nil {
			p.log.Warn("cannot remove the process group from the record", "pid", p.group.PID(), "err", err)
		}
	}
	close(p.logStop)
	<-p.logDone
	p.exit = &ExitError{Code: -1, Err: ErrHandedOver}
	close(p.done)
}

// dupFile duplicates f's descriptor (close-on-exec) without changing its
// mode, which os.File.Fd would.
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var dup int
	var derr error
	if err := rc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(dup), f.Name()), nil
}

// Adopt goes on speaking to a server another process handed over (h, and
// files: its stdin, stdout and stderr, which Adopt takes), as a Conn of
// this process's: no handshake (it was done), the process watched
// through proc.Adopt (not this process's child: its exit status is
// unknown, ErrNotChild), stopped as a Command's is. cmd gives the
// Stderr ring, Record, StopGrace and Kept of the Command it stands for
// (its Path, for the logs); o is as for Connect.
func Adopt(h HandedOver, files []*os.File, cmd Command, o Options) (*Conn, error) {
	if len(files) != 3 {
		closeAll(files)
		return nil, fmt.Errorf("adopt %s: %d descriptors, want 3", o.Name, len(files))
	}
	g, err := proc.Adopt(h.PID, h.StartTime, h.Marker)
	if err != nil {
		closeAll(files)
		return nil, err
	}
	o.defaults()
	c := newConn(o)
	if cmd.Stderr == nil {
		cmd.Stderr = NewStderrRing(nil, 0)
	}
	if cmd.StopGrace <= 0 {
		cmd.StopGrace = DefaultStopGrace
	}
	p := newProcess(cmd, &c.o, c.longLine)
	p.run(g, files[0], files[1], files[2])
	c.s = p
	c.era, c.version, c.serverInfo, c.caps, c.instructions = h.Era, h.Version, h.ServerInfo, h.Capabilities, h.Instructions
	if len(c.caps) == 0 {
		c.caps = json.RawMessage(`{}`)
	}
	c.nextID.Store(h.NextID)
	c.start()
	p.log.Info("upstream adopted from the daemon an upgrade replaced", "pid", g.PID())
	return c, nil
}
