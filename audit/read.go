package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// Files are the audit file at path and its rotations that exist, oldest
// first: path.N … path.1, path. The rotations are counted from 1 up to
// the first that is missing.
func Files(path string) []string {
	var rotations []string
	for i := 1; ; i++ {
		if _, err := os.Stat(Rotated(path, i)); err != nil {
			break
		}
		rotations = append(rotations, Rotated(path, i))
	}
	out := make([]string, 0, len(rotations)+1)
	for i := len(rotations) - 1; i >= 0; i-- {
		out = append(out, rotations[i])
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	}
	return out
}

// Filter selects records: by tool (tools/call's tool), by server ("" for
// any; "snodod" for snodod's own items) and by time.
type Filter struct {
	Tool, Server string
	Since        time.Time
}

// Match reports whether r passes f.
func (f Filter) Match(r *Record) bool {
	switch {
	case f.Tool != "" && r.Tool != f.Tool:
		return false
	case f.Server == "snodod" && r.Server != "":
		return false
	case f.Server != "" && f.Server != "snodod" && r.Server != f.Server:
		return false
	case !f.Since.IsZero() && r.Time.Before(f.Since):
		return false
	}
	return true
}

// Line is one line of the log: as written (without its newline) and
// decoded. A line that does not decode has Err set.
type Line struct {
	Raw    []byte
	Record Record
	Err    error
}

// Read calls fn with each line of the files in order, stopping at fn's
// first error. A last line without its newline is being written: it is
// left out.
func Read(files []string, fn func(Line) error) error {
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // rotated away meanwhile
			}
			return err
		}
		_, err = readLines(bufio.NewReaderSize(f, 64<<10), fn, true)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// readLines calls fn with each complete line of r; with partial, a last
// line without its newline is returned unread (for Follow to complete).
func readLines(r *bufio.Reader, fn func(Line) error, partial bool) ([]byte, error) {
	for {
		b, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(b) > 0 && !partial {
				return nil, fn(decodeLine(b))
			}
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if err := fn(decodeLine(b[:len(b)-1])); err != nil {
			return nil, err
		}
	}
}

func decodeLine(b []byte) Line {
	l := Line{Raw: b}
	l.Err = json.Unmarshal(b, &l.Record)
	return l
}

// Follow prints (fn) what is appended to path from now on, until ctx
// ends, following it across rotations: when path is another file than the
// one open (rotated: renamed, a new one made), the rest of the old one is
// read, then the new one from its start; a file truncated is read again
// from its start. It looks every poll.
func Follow(ctx context.Context, path string, poll time.Duration, fn func(Line) error) error {
	var f *os.File
	var r *bufio.Reader
	var pending []byte
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	openAt := func(end bool) {
		nf, err := os.Open(path)
		if err != nil {
			return // not made yet: looked for again
		}
		if end {
			nf.Seek(0, io.SeekEnd)
		}
		f, r, pending = nf, bufio.NewReaderSize(nf, 64<<10), nil
	}
	openAt(true)
	// read reads what f has; with partial, a last line without its
	// newline waits for the rest.
	read := func(partial bool) error {
		rest, err := readLines(r, func(l Line) error {
			if len(pending) > 0 {
				l = decodeLine(append(pending, l.Raw...))
				pending = nil
			}
			return fn(l)
		}, partial)
		pending = append(pending, rest...)
		return err
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if f == nil {
			openAt(false)
		}
		if f != nil {
			if err := read(true); err != nil {
				return err
			}
			cur, err1 := f.Stat()
			now, err2 := os.Stat(path)
			switch {
			case err1 != nil || err2 != nil:
				// Renamed and not made again yet: the old one is kept.
			case !os.SameFile(cur, now):
				// Rotated: the rest of the old one, then the new one.
				if err := read(false); err != nil {
					return err
				}
				f.Close()
				f = nil
				continue
			default:
				if off, err := f.Seek(0, io.SeekCurrent); err == nil && now.Size() < off {
					f.Seek(0, io.SeekStart) // truncated
					r.Reset(f)
					pending = nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
