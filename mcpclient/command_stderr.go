package mcpclient

import (
	"bytes"
)

// The child's stderr is read from its first byte, so that a server that
// writes a lot before it answers (validation warnings, npm's output) never
// blocks on a full pipe (docs/upstreams.md §4). Every byte goes to the ring at
// once; lines go to the daemon's log through a bounded queue, and when the
// log is slower than the child, lines are dropped and counted rather than
// the child waiting.
const (
	stderrReadBytes = 32 << 10
	maxLogLine      = 4 << 10 // longer lines are logged in pieces
	logQueue        = 256     // lines waiting for the log
)

type stream string

const (
	streamStderr stream = "stderr"
	streamStdout stream = "stdout" // lines that were not JSON-RPC
)

type logLine struct {
	stream stream
	text   string
}

// drainStderr reads the child's stderr until its end.
func (p *process) drainStderr() {
	defer close(p.stderrDone)
	buf := make([]byte, stderrReadBytes)
	var partial []byte
	for {
		n, err := p.stderr.Read(buf)
		b := buf[:n]
		_, _ = p.cmd.Stderr.Write(b)
		p.tail.Write(b)
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				room := maxLogLine - len(partial)
				if len(b) > room {
					p.logText(streamStderr, append(partial, b[:room]...))
					partial, b = partial[:0], b[room:]
					continue
				}
				partial = append(partial, b...)
				break
			}
			line := b[:i]
			if len(partial) > 0 {
				line = append(partial, line...)
				partial = partial[:0]
			}
			for len(line) > maxLogLine {
				p.logText(streamStderr, line[:maxLogLine])
				line = line[maxLogLine:]
			}
			p.logText(streamStderr, line)
			b = b[i+1:]
		}
		if err != nil {
			if len(partial) > 0 {
				p.logText(streamStderr, partial)
			}
			return
		}
	}
}

// logText queues one line for the log without ever waiting.
func (p *process) logText(s stream, text []byte) {
	text = bytes.TrimRight(text, "\r")
	if len(text) == 0 {
		return
	}
	select {
	case p.lines <- logLine{s, string(text)}:
	default:
		p.logDropped.Add(1)
	}
}

// logStderr writes queued lines to the log until logStop, then what is
// left.
func (p *process) logStderr() {
	defer close(p.logDone)
	write := func(l logLine) {
		if n := p.logDropped.Swap(0); n > 0 {
			p.log.Warn("upstream output lines not logged: the log is slower than the upstream", "lines", n)
		}
		p.log.Info(l.text, "stream", string(l.stream))
	}
	for {
		select {
		case l := <-p.lines:
			write(l)
		case <-p.logStop:
			for {
				select {
				case l := <-p.lines:
					write(l)
				default:
					return
				}
			}
		}
	}
}
