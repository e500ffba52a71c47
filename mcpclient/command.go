package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/internal/tailbuf"
)

// Command is the transport of a hosted server: a child process, started
// as Path with Args, Env and Dir, spoken to over its stdin and stdout
// (NDJSON, docs/transport.md §3), its stderr kept and logged. Everything is
// resolved by the caller; Env nil means an empty environment, never the
// daemon's.
type Command struct {
	Path string   // the program, resolved against the child's PATH
	Args []string // argv[1:]
	Env  []string // the child's whole environment, KEY=VALUE; never logged
	Dir  string   // working directory

	// Stderr receives the child's stderr from its first byte, and the
	// lines of its stdout that are not JSON-RPC; nil keeps a private ring
	// of the default size outside any budget.
	Stderr *StderrRing
	// Record, when non-nil, gets the child's process group right after
	// the spawn and loses it once the child is reaped, so that a daemon
	// killed mid-start leaves nothing its successor misses.
	Record GroupRecorder
	// StopGrace is each wait of a stop: after closing stdin and after
	// SIGTERM; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Spawned, when set, is called once with the child's pid right after
	// the spawn, before the handshake: a start under way shows its process
	// (status). It must not block.
	Spawned func(pid int)
	// Sandbox, unless its Level is off or empty, starts the child through
	// the sandbox's launcher (internal/sandbox.Wrap) under this policy:
	// the pid is then the launcher's (the server's init in its PID
	// namespace, or the server itself once execve'd), signals and the
	// whole-tree stop reach the server through it, and the exit status is
	// the server's own. A launcher that refuses (Policy.Required) or
	// cannot start the server fails the start with its reason.
	Sandbox sandbox.Policy
	// Sandboxed, when set, gets the launcher's report (what is enforced
	// and what is not) once the server runs, before the handshake. It
	// must not block.
	Sandboxed func(sandbox.Report)
	// Kept starts the child without the parent-death signal
	// (proc.StartKept), so that it can outlive this process: an upgrade
	// hands it over (Conn.HandOver) to the daemon that follows, which
	// adopts it (Adopt).
	Kept bool
}

// GroupRecorder keeps the process groups a daemon runs, for its successor
// to end after a crash (proc.GroupRecord). Its methods may be called
// from any goroutine.
type GroupRecorder interface {
	Add(g *proc.Group) error
	Remove(g *proc.Group) error
}

// DefaultStopGrace is Command.StopGrace's default.
const DefaultStopGrace = 5 * time.Second

// The process's own waits, not worth a setting: how long a child whose
// stdout ended may take to exit before it is killed (it cannot be spoken
// to any more), and how long its pipes may stay open after the leader is
// reaped (a process outside the group holding them) before they are
// closed.
const (
	eofGrace   = time.Second
	drainGrace = time.Second
)

// stderrTailBytes is how much of its stderr an ExitError quotes.
const stderrTailBytes = 2 << 10

// process is a Command's stream: one running child. It owns the process:
// nothing else signals or waits for it.
//
// Goroutines: one writes stdin when the pipe would block (a sender writes
// its frame itself, without waiting, when nothing waits before it:
// writer); one drains stderr and one logs its lines; one supervises the
// process's end. Stdout is read by the Conn's reading goroutine, through
// Read. All end before done is closed.
type process struct {
	cmd    Command
	limit  int
	log    *slog.Logger
	group  *proc.Group
	launch *sandbox.Launch  // nil: not sandboxed
	reader *framing.Scanner // read by Read's goroutine
	stdout *os.File         // read ends, closed once drained
	stderr *os.File

	w writer

	tooLong func(TooLongError) // Link.TooLong
	final   error              // Read's final error, once reached, on its goroutine

	readDone   chan struct{} // Read returned its final error
	readOnce   sync.Once
	readErr    error         // why, when not EOF; set before readDone closes
	stderrDone chan struct{} // the stderr drain ended
	logStop    chan struct{} // no more lines will be queued
	logDone    chan struct{} // the stderr logger ended
	logDropped atomic.Int64  // lines the log could not take
	done       chan struct{}
	exit       *ExitError // set before done closes

	tail  tailbuf.Buffer // this process's own last stderrTailBytes of stderr, for its ExitError
	lines chan logLine

	// handedOver is set once HandOver stops reading: the child runs on,
	// another process's (command_handover.go).
	handedOver atomic.Bool
}

// Open spawns the command (proc.Start: own group, parent-death signal)
// and starts draining its stderr from the first byte into c.Stderr and the
// log, so that a server writing a lot before it answers never blocks.
func (cmd Command) Open(_ context.Context, l Link) (Stream, error) {
	o := l.Options
	if cmd.Stderr == nil {
		cmd.Stderr = NewStderrRing(nil, 0)
	}
	if cmd.StopGrace <= 0 {
		cmd.StopGrace = DefaultStopGrace
	}
	p := newProcess(cmd, o, l.TooLong)
	if err := p.spawn(); err != nil {
		return nil, err
	}
	return p, nil
}

// newProcess is the process of cmd (defaults applied) before its child
// runs.
func newProcess(cmd Command, o *Options, tooLong func(TooLongError)) *process {
	p := &process{
		cmd:        cmd,
		limit:      o.MaxLineBytes,
		tooLong:    tooLong,
		log:        o.Logger.With("upstream", o.Name),
		readDone:   make(chan struct{}),
		stderrDone: make(chan struct{}),
		logStop:    make(chan struct{}),
		logDone:    make(chan struct{}),
		done:       make(chan struct{}),
		lines:      make(chan logLine, logQueue),
	}
	p.tail.Max = stderrTailBytes
	return p
}

// spawn starts the child with its three pipes and the process's
// goroutines.
func (p *process) spawn() error {
	cmd := p.cmd
	path, err := lookPath(cmd.Path, cmd.Env)
	if err != nil {
		return &ExitError{Code: -1, Err: err}
	}
	var files []*os.File // every pipe end, closed on failure
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll(files)
		return &ExitError{Code: -1, Err: fmt.Errorf("start %s: %w", cmd.Path, err)}
	}
	ec := &exec.Cmd{
		Path:   path,
		Args:   append([]string{cmd.Path}, cmd.Args...),
		Env:    cmd.Env,
		Dir:    cmd.Dir,
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
	}
	if ec.Env == nil {
		ec.Env = []string{} // the whole environment is the caller's: nil is none, not the daemon's
	}
	var launch *sandbox.Launch
	if lvl := cmd.Sandbox.Level; lvl != "" && lvl != sandbox.Off {
		if launch, err = sandbox.Wrap(ec, cmd.Sandbox); err != nil {
			closeAll(files)
			return &ExitError{Code: -1, Err: fmt.Errorf("start %s: %w", cmd.Path, err)}
		}
	}
	start := proc.Start
	if cmd.Kept {
		start = proc.StartKept
	}
	g, err := start(ec)
	closeAll([]*os.File{inR, outW, errW}) // the child's ends
	if err != nil {
		if launch != nil {
			launch.Close()
		}
		closeAll([]*os.File{inW, outR, errR})
		return &ExitError{Code: -1, Err: fmt.Errorf("start %s: %w", cmd.Path, err)}
	}
	if launch != nil {
		rep, err := launch.Started()
		if err != nil {
			// The launcher refused or failed, and said why on stderr too
			// (the server's): it has exited or is exiting.
			_ = g.Stop(0)
			tail, _ := io.ReadAll(io.LimitReader(errR, stderrTailBytes))
			closeAll([]*os.File{inW, outR, errR})
			return &ExitError{Code: -1, Err: fmt.Errorf("start %s: %w", cmd.Path, err), Stderr: string(tail)}
		}
		if w := rep.Warning(); w != "" {
			p.log.Warn("upstream started with parts of its sandbox missing", "pid", g.PID(), "missing", w)
		}
		p.log.Debug("upstream sandboxed", "pid", g.PID(), "sandbox", rep.String())
		if cmd.Sandboxed != nil {
			cmd.Sandboxed(rep)
		}
	}
	p.launch = launch
	if cmd.Spawned != nil {
		defer cmd.Spawned(g.PID())
	}
	p.run(g, inW, outR, errR)
	p.log.Debug("upstream started", "pid", g.PID(), "command", cmd.Path)
	return nil
}

// run records the group and starts the process's goroutines on its
// pipes: the ends this process keeps, of a child it started or adopted.
func (p *process) run(g *proc.Group, inW, outR, errR *os.File) {
	p.group = g
	if p.cmd.Record != nil {
		if err := p.cmd.Record.Add(g); err != nil {
			p.log.Warn("cannot record the process group; a daemon crash would leave it running", "pid", g.PID(), "err", err)
		}
	}
	p.stdout, p.stderr = outR, errR
	p.w.init(inW, p.log, p.kill)
	watch := &lineWatch{f: outR, limit: p.limit, onLong: p.longLine}
	p.reader = framing.NewScanner(watch, p.limit) // read on Read's goroutine
	go p.w.loop()
	go p.drainStderr()
	go p.logStderr()
	go p.supervise()
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// lookPath resolves name against the PATH of env (the child's, not the
// daemon's: a systemd user daemon's PATH is rarely the login shell's).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("start %s: executable file not found in the upstream's PATH (%s); give command as an absolute path or set PATH in its env", name, path)
}

// Read returns the next line of stdout. A line over the limit is
// reported (Link.TooLong) once it has ended, when lineWatch has its id.
func (p *process) Read() ([]byte, error) {
	for p.final == nil {
		line, err := p.reader.ReadLine()
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, framing.ErrLineTooLong):
			// lineWatch reports it, with its id, once the line has ended.
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded): // stopReading
			p.final = io.EOF
		default:
			p.readErr = err
			p.final = err
		}
	}
	p.readOnce.Do(func() { close(p.readDone) })
	return nil, p.final
}

// longLine is lineWatch's report of a line over the limit, on Read's
// goroutine.
func (p *process) longLine(head, tail []byte) {
	n, ok := longLineID(head, tail)
	if !ok {
		p.log.Warn("upstream wrote a line over the line limit; dropped", "limit", p.limit, "start", string(head[:min(len(head), 80)]))
	}
	p.tooLong(TooLongError{ID: n, HasID: ok})
}

// noise logs a stdout line that was not JSON-RPC as the child's output.
func (p *process) noise(line []byte) {
	line = append(line[:len(line):len(line)], '\n')
	_, _ = p.cmd.Stderr.Write(line)
	p.tail.Write(line)
	p.logText(streamStdout, line[:len(line)-1])
}

// Send queues m for stdin.
func (p *process) Send(m *Outgoing) bool { return p.w.send(m) }

// Cancel withdraws m, or sends notifications/cancelled for it.
func (p *process) Cancel(m *Outgoing, reason string) bool {
	if p.w.withdraw(m) {
		return false
	}
	p.w.send(&Outgoing{Data: cancelFrame(m.ID, reason)})
	return true
}

// queuedReplies is how many answers to the child's requests wait for its
// stdin.
func (p *process) queuedReplies() int { return p.w.queuedReplies() }

// PID is the child's process id (and process group id).
func (p *process) PID() int { return p.group.PID() }

// Close stops the child gracefully (docs/upstreams.md §4): close stdin,
// wait up to StopGrace, SIGTERM to the group, StopGrace, SIGKILL to the
// group, reap. A ctx that ends early skips to SIGKILL.
func (p *process) Close(ctx context.Context) {
	if p.handedOver.Load() {
		<-p.done
		return
	}
	p.w.close()
	steps := []func(){func() { _ = p.group.Signal(syscall.SIGTERM) }, p.kill}
	for _, next := range steps {
		t := time.NewTimer(p.cmd.StopGrace)
		select {
		case <-p.group.Done():
			t.Stop()
			<-p.done
			return
		case <-ctx.Done():
			t.Stop()
			p.kill()
			<-p.done
			return
		case <-t.C:
			p.log.Info("upstream did not stop in time; signalling its group", "pid", p.group.PID())
			next()
		}
	}
	<-p.done
}

// kill sends SIGKILL to the group.
func (p *process) kill() { _ = p.group.Signal(syscall.SIGKILL) }

func (p *process) Done() <-chan struct{} { return p.done }

// Err is the process's *ExitError once done.
func (p *process) Err() error {
	select {
	case <-p.done:
		return p.exit
	default:
		return nil
	}
}

// supervise waits for the process's end and finishes the stream.
func (p *process) supervise() {
	select {
	case <-p.group.Done():
	case <-p.readDone:
		if p.handedOver.Load() {
			p.release()
			return
		}
		// stdout ended: the child cannot be spoken to any more. It is
		// usually exiting; if not, it is killed.
		t := time.NewTimer(eofGrace)
		select {
		case <-p.group.Done():
			t.Stop()
		case <-t.C:
			p.kill()
			<-p.group.Done()
		}
	}
	if p.cmd.Record != nil {
		if err := p.cmd.Record.Remove(p.group); err != nil {
			p.log.Warn("cannot remove the process group from the record", "pid", p.group.PID(), "err", err)
		}
	}
	// The group is gone; a pipe still open belongs to a process that left
	// it, and is closed after a moment so the stream can end.
	waitOr(p.readDone, drainGrace, p.stopReading)
	waitOr(p.stderrDone, drainGrace, func() { _ = p.stderr.Close() })
	waitErr := p.group.Wait()
	if p.launch != nil {
		waitErr = p.launch.Exited(waitErr)
	}
	exit := exitError(waitErr, string(p.tail.Tail()))
	if p.readErr != nil && exit.Err == nil {
		exit.Err = fmt.Errorf("read stdout: %w", p.readErr)
	}
	p.w.close()
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	close(p.logStop) // the reader and the drain have ended: nothing queues lines
	<-p.logDone
	<-p.w.done
	p.exit = exit
	close(p.done)
}

// stopReading interrupts Read's read of stdout, which then returns as at
// the end of input.
func (p *process) stopReading() { _ = p.stdout.SetReadDeadline(time.Now()) }

// waitOr waits for ch up to d, then calls force and waits again.
func waitOr(ch <-chan struct{}, d time.Duration, force func()) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		force()
		<-ch
	}
}
