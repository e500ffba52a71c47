package catalog

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/snodod/snodod/server"
)

// progressReader reads an exec tool's progress lines from file descriptor
// 3 (progress = true) and reports each to the client, when the request
// asked for progress (a progressToken), through server.ReportProgress. A
// line is one JSON object: {"progress": N, "total": M, "message": "…"},
// total and message optional. Lines that are not such an object are
// skipped (logged at debug), and so is a report the client side refuses.
type progressReader struct {
	r, w *os.File
	done chan struct{}
}

// newProgressReader opens the pipe, hands its write end to cmd as fd 3
// and starts reading.
func newProgressReader(ctx context.Context, cmd *exec.Cmd, log *slog.Logger) (*progressReader, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{w} // the first extra file is fd 3
	p := &progressReader{r: r, w: w, done: make(chan struct{})}
	go p.read(ctx, log)
	return p, nil
}

// started closes this process's copy of the write end, once the child has
// its own (or failed to start): the reader sees EOF when the child's
// group has ended.
func (p *progressReader) started() { _ = p.w.Close() }

// wait waits until every line written was reported, giving up (and
// dropping the rest) StopGrace after the group ended if an escaped process
// holds the pipe open.
func (p *progressReader) wait() {
	t := time.NewTimer(StopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.r.Close()
		<-p.done
	}
	_ = p.r.Close()
}

func (p *progressReader) read(ctx context.Context, log *slog.Logger) {
	defer close(p.done)
	br := bufio.NewReaderSize(p.r, 4096)
	for {
		line, err := readLine(br, MaxProgressLineBytes)
		if line != nil {
			var v struct {
				Progress *float64 `json:"progress"`
				Total    *float64 `json:"total"`
				Message  string   `json:"message"`
			}
			if json.Unmarshal(line, &v) != nil || v.Progress == nil {
				log.Debug("skipped a progress line that is not {\"progress\": N, ...}", "line", string(line))
			} else {
				rep := server.Progress{Progress: *v.Progress, Message: v.Message}
				if v.Total != nil {
					rep.Total, rep.HasTotal = *v.Total, true
				}
				_ = server.ReportProgress(ctx, rep)
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine returns the next line without its newline, or nil for a line
// longer than max (skipped whole). err is the reader's, at the end.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch err {
		case bufio.ErrBufferFull:
			continue
		case nil:
			if tooLong {
				return nil, nil
			}
			return line[:len(line)-1], nil
		}
		if tooLong || len(line) == 0 {
			return nil, err
		}
		return line, err
	}
}
