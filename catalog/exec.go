package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/internal/tailbuf"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/tracing"
)

// Limits of every exec tool run that have no configuration key.
const (
	// StopGrace is how long a run's process group has between SIGTERM
	// and SIGKILL when it is cancelled or times out.
	StopGrace = 2 * time.Second
	// StderrTailBytes is how much of stderr a failed run's result shows:
	// the end, where the reason usually is.
	StderrTailBytes = 2 << 10
	// MaxProgressLineBytes is the longest progress line read from fd 3;
	// a longer one is skipped.
	MaxProgressLineBytes = 64 << 10
)

// execTool runs one [tools.NAME] entry: its program in a process group of
// its own (internal/proc), argv built from the arguments without a shell
// (exec_argv.go), at most max_concurrency runs at once. call may be called
// concurrently.
type execTool struct {
	cfg config.Tool
	// policy is the sandbox of each run (config.Tool.SandboxRun), dir
	// its working directory.
	policy sandbox.Policy
	dir    string
	warned sync.Once // what its sandbox lacks, logged at the first run
	slots  chan struct{}
	log    *slog.Logger
	record func() *proc.GroupRecord // nil, or returning nil: no record
}

func newExecTool(cfg config.Tool, policy sandbox.Policy, log *slog.Logger, record func() *proc.GroupRecord) *execTool {
	policy, dir := cfg.SandboxRun(policy)
	return &execTool{cfg: cfg, policy: policy, dir: dir, slots: make(chan struct{}, cfg.MaxConcurrency), log: log.With("tool", cfg.Name), record: record}
}

// sandboxed reports whether t's runs start in a sandbox.
func (t *execTool) sandboxed() bool { return t.policy.Level != "" && t.policy.Level != sandbox.Off }

// definition is the tool as tools/list shows it.
func (t *execTool) definition() *server.Tool {
	d := &server.Tool{Name: t.cfg.Name, Title: t.cfg.Title, Description: t.cfg.Description,
		InputSchema: t.cfg.InputSchema, OutputSchema: t.cfg.OutputSchema}
	if a := t.cfg.Annotations; a != nil {
		d.Annotations = &server.ToolAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint,
			DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	return d
}

// call runs the tool once. A cancelled request (ctx ended) stops the
// group and returns ctx's error, which the runtime never writes. A run
// that exits non-zero, is killed or times out gives an isError result with
// the status and the end of stderr.
func (t *execTool) call(ctx context.Context, req *server.CallToolRequest) (res *server.CallToolResult, err error) {
	select {
	case t.slots <- struct{}{}:
		defer func() { <-t.slots }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var span *tracing.Span // the run's, nil with tracing off (docs/observability.md, "Traces")
	if tracing.Active(ctx) {
		ctx, span = tracing.StartExec(ctx, t.cfg.Name)
		defer func() { span.EndRun(res != nil && res.IsError, err) }()
	}
	values := callValues(req.Arguments, t.cfg.Arguments)
	args := expandArgs(t.cfg.Args, values)
	if slices.ContainsFunc(args, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
		// execve(2) takes C strings: a NUL would end the element early,
		// so exec refuses it with a bare EINVAL (found by FuzzExecArgv).
		return errorResult(fmt.Sprintf("%s: an argument holds a NUL byte (\\u0000), which a program's arguments cannot carry; the tool was not run", t.cfg.Name)), nil
	}
	cmd := exec.Command(t.cfg.Path, args...)
	cmd.Dir = t.dir
	cmd.Env = append([]string{}, t.cfg.Env...) // never nil: nil would be the daemon's whole environment
	if span != nil {
		// The run's span is the program's parent, in the environment
		// variables OpenTelemetry's SDKs read (TRACEPARENT, TRACESTATE).
		cmd.Env = append(cmd.Env, tracing.Environ(ctx)...)
	}
	if t.cfg.HasStdin {
		cmd.Stdin = strings.NewReader(expandStdin(t.cfg.Stdin, values))
	}
	stdout := &headBuffer{max: t.cfg.MaxOutputBytes}
	stderr := &tailbuf.Buffer{Max: StderrTailBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process that escaped the group (setsid) may hold the pipes open
	// after the group ended; Wait gives up on them after this.
	cmd.WaitDelay = StopGrace
	var progress *progressReader
	if t.cfg.Progress {
		var err error
		if progress, err = newProgressReader(ctx, cmd, t.log); err != nil {
			return nil, fmt.Errorf("%s: open the progress pipe: %w", t.cfg.Name, err)
		}
	}
	// The record is opened before the start: its daemon line names the
	// marker by which the next daemon finds what this run leaves, even if
	// a crash comes before the group itself is recorded.
	rec := t.groupRecord()
	// The tool's deadline covers its start too: a sandboxed start on a
	// busy machine may outlast what is left of session.request_timeout,
	// which would answer -32603 for a run that never got its timeout.
	executor.ExtendDeadline(ctx, t.deadline())
	var launch *sandbox.Launch
	if t.sandboxed() {
		var err error
		if launch, err = sandbox.Wrap(cmd, t.policy); err != nil {
			if progress != nil {
				progress.started()
				progress.wait()
			}
			return errorResult(fmt.Sprintf("%s: cannot start %s: %v", t.cfg.Name, t.cfg.Path, err)), nil
		}
	}
	g, err := proc.Start(cmd)
	if progress != nil {
		progress.started() // closes this process's copy of the write end
	}
	if err == nil && launch != nil {
		var rep sandbox.Report
		if rep, err = launch.Started(); err != nil {
			_ = g.Stop(0) // the launcher refused or failed, and has exited or is exiting
		} else if w := rep.Warning(); w != "" {
			t.warned.Do(func() { t.log.Warn("exec tool runs with parts of its sandbox missing", "missing", w) })
		}
	} else if launch != nil {
		launch.Close()
	}
	if err != nil {
		if progress != nil {
			progress.wait()
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the program is named already
		}
		return errorResult(fmt.Sprintf("%s: cannot start %s: %v", t.cfg.Name, t.cfg.Path, err)), nil
	}
	defer t.recorded(rec, g)()
	t.waitOnChild(ctx)
	timer := time.NewTimer(t.cfg.Timeout)
	defer timer.Stop()
	timedOut := false
	select {
	case <-g.Done():
	case <-ctx.Done():
		_ = g.Stop(StopGrace)
		if progress != nil {
			progress.wait()
		}
		return nil, ctx.Err()
	case <-timer.C:
		timedOut = true
		_ = g.Stop(StopGrace)
	}
	werr := g.Wait()
	if launch != nil {
		werr = launch.Exited(werr)
	}
	span.SetExit(cmd.ProcessState.ExitCode())
	if progress != nil {
		progress.wait() // every report precedes the result
	}
	switch {
	case timedOut:
		return t.failure(fmt.Sprintf("timed out after %s (tools.%s.timeout); its process group was stopped", t.cfg.Timeout, t.cfg.Name), stdout, stderr), nil
	case werr != nil:
		return t.failure(exitText(werr), stdout, stderr), nil
	}
	return t.success(stdout)
}

// groupRecord is the daemon's record of process groups, or nil.
func (t *execTool) groupRecord() *proc.GroupRecord {
	if t.record == nil {
		return nil
	}
	return t.record()
}

// recorded records g in rec, the daemon's record of process groups, if
// there is one, and returns what forgets it once g has been reaped.
func (t *execTool) recorded(rec *proc.GroupRecord, g *proc.Group) (forget func()) {
	if rec == nil {
		return func() {}
	}
	if err := rec.Add(g); err != nil {
		t.log.Warn("cannot record the run's process group; a daemon crash would leave it running", "pid", g.PID(), "err", err)
	}
	return func() {
		<-g.Done()
		if err := rec.Remove(g); err != nil {
			t.log.Warn("cannot remove the run's process group from the record", "pid", g.PID(), "err", err)
		}
	}
}

// success shapes the output of a run that exited 0.
func (t *execTool) success(stdout *headBuffer) (*server.CallToolResult, error) {
	if t.cfg.Output == "json" {
		if stdout.cut() {
			return errorResult(fmt.Sprintf("%s: the JSON output is longer than tools.%s.max_output_bytes (%d bytes)",
				t.cfg.Name, t.cfg.Name, t.cfg.MaxOutputBytes)), nil
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(stdout.buf))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || dec.More() {
			if err == nil {
				err = errors.New("more than one JSON value")
			}
			return errorResult(fmt.Sprintf("%s: the output is not one JSON value (output = \"json\"): %v", t.cfg.Name, err)), nil
		}
		// Without content, the runtime adds the JSON as a text block.
		return &server.CallToolResult{Content: []server.Content{}, StructuredContent: v}, nil
	}
	return &server.CallToolResult{Content: []server.Content{server.TextContent(stdout.text(t.cfg.Name))}}, nil
}

// failure is the isError result of a run that did not succeed: why, the
// end of stderr, and what stdout held.
func (t *execTool) failure(why string, stdout *headBuffer, stderr *tailbuf.Buffer) *server.CallToolResult {
	msg := t.cfg.Name + ": " + why
	if tail := stderrText(stderr); tail != "" {
		msg += "\nstderr:\n" + tail
	}
	res := errorResult(msg)
	if len(stdout.buf) > 0 {
		res.Content = append(res.Content, server.TextContent(stdout.text(t.cfg.Name)))
	}
	return res
}

// exitText says how a run ended: "exited with status 2", "killed by
// signal 9 (killed)".
func exitText(err error) string {
	var se *sandbox.ExitError
	if errors.As(err, &se) { // the program's own status, from its sandbox's init
		if se.Signal != 0 {
			return fmt.Sprintf("killed by signal %d (%s)", int(se.Signal), se.Signal)
		}
		return fmt.Sprintf("exited with status %d", se.Code)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d (%s)", ws.Signal(), ws.Signal())
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return "its output stayed open after it exited (a process it started escaped its group)"
	}
	return err.Error()
}

// headBuffer keeps the first max bytes written and counts the rest, so a
// chatty tool is never blocked on a full pipe.
type headBuffer struct {
	max   int
	buf   []byte
	total int64
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *headBuffer) cut() bool { return b.total > int64(len(b.buf)) }

// text is the output as valid UTF-8, with a note when it was cut.
func (b *headBuffer) text(tool string) string {
	if !b.cut() {
		return strings.ToValidUTF8(string(b.buf), "\uFFFD")
	}
	return strings.ToValidUTF8(string(trimPartialRune(b.buf)), "\uFFFD") +
		fmt.Sprintf("\n[output cut at %d bytes of %d: raise tools.%s.max_output_bytes to see more]", b.max, b.total, tool)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, left
// by a cut.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// stderrText is the tail of a run's stderr as a failure quotes it: without
// its final newlines, invalid UTF-8 replaced.
func stderrText(b *tailbuf.Buffer) string {
	return strings.ToValidUTF8(strings.TrimRight(string(b.Tail()), "\n"), "\uFFFD")
}
