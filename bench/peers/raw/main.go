// Command raw is the floor of snodod's benchmark: a hand-written NDJSON loop
// that answers the demo tools (echo, sleep, big) with no validation, no
// schema and no reflection. It is the fastest this harness can be answered
// on this machine, not a product: it trusts every line to be a well-formed
// request and answers the 2025-06-18 and 2026-07-28 shapes alike (the
// latter with "resultType":"complete").
//
// One goroutine reads lines and answers echo and big at once; sleep runs on
// its own goroutine until its timer fires or notifications/cancelled names
// it (then nothing is written for it). One writer goroutine batches
// answers and flushes when it has nothing more to write. It exits when
// standard input ends and every sleep has finished.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/snodod/snodod/bench/internal/wire"
)

func main() {
	w := newWriter(os.Stdout)
	s := &server{w: w, sleeping: map[string]chan struct{}{}}
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	var long []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			s.handle(line)
		}
		if err != nil {
			break // io.EOF, or a read error: the end either way
		}
	}
	s.wg.Wait()
	w.close()
}

type server struct {
	w  *writer
	wg sync.WaitGroup

	mu       sync.Mutex
	sleeping map[string]chan struct{} // by raw id
}

func (s *server) handle(line []byte) {
	var id, method, params []byte
	wire.Members(line, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			id = v
		case "method":
			method = wire.Unquote(v)
		case "params":
			params = v
		}
		return true
	})
	switch string(method) {
	case "initialize":
		version := wire.Unquote(wire.Member(params, "protocolVersion"))
		if version == nil {
			version = []byte("2025-06-18")
		}
		s.reply(id, `{"protocolVersion":"`+string(version)+`","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"0"}}`)
	case "notifications/initialized":
	case "ping":
		s.reply(id, `{}`)
	case "tools/list":
		s.reply(id, toolsList)
	case "tools/call":
		s.call(id, params)
	case "notifications/cancelled":
		s.mu.Lock()
		if c, ok := s.sleeping[string(wire.Member(params, "requestId"))]; ok {
			close(c)
			delete(s.sleeping, string(wire.Member(params, "requestId")))
		}
		s.mu.Unlock()
	default:
		if id != nil {
			s.w.send(append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"error":{"code":-32601,"message":"Method not found"}}`...), '\n'))
		}
	}
}

const toolsList = `{"tools":[` +
	`{"name":"big","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}},` +
	`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},` +
	`{"name":"sleep","inputSchema":{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}}]}`

func (s *server) call(id, params []byte) {
	var name, args, meta []byte
	wire.Members(params, func(k, v []byte) bool {
		switch string(k) {
		case "name":
			name = wire.Unquote(v)
		case "arguments":
			args = v
		case "_meta":
			meta = v
		}
		return true
	})
	tail := `}],"isError":false}}` + "\n"
	if meta != nil && wire.Member(meta, "io.modelcontextprotocol/protocolVersion") != nil {
		tail = `}],"isError":false,"resultType":"complete"}}` + "\n"
	}
	switch string(name) {
	case "echo":
		text := wire.Member(args, "text")
		b := make([]byte, 0, len(id)+len(text)+96)
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, id...)
		b = append(b, `,"result":{"content":[{"type":"text","text":`...)
		b = append(b, text...)
		s.w.send(append(b, tail...))
	case "big":
		n, _ := wire.Int(wire.Member(args, "bytes"))
		n = max(0, min(n, 64<<20))
		b := make([]byte, 0, int(n)+len(id)+96)
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, id...)
		b = append(b, `,"result":{"content":[{"type":"text","text":"`...)
		b = append(b, bytes.Repeat([]byte{'x'}, int(n))...)
		b = append(b, '"')
		s.w.send(append(b, tail...))
	case "sleep":
		ms, _ := wire.Int(wire.Member(args, "ms"))
		id := bytes.Clone(id)
		cancel := make(chan struct{})
		s.mu.Lock()
		s.sleeping[string(id)] = cancel
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-cancel:
				return // cancelled: nothing is written for it
			case <-t.C:
			}
			s.mu.Lock()
			delete(s.sleeping, string(id))
			s.mu.Unlock()
			b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
			b = append(b, `,"result":{"content":[{"type":"text","text":"done"`...)
			s.w.send(append(b, tail...))
		}()
	default:
		s.w.send([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32602,"message":"Unknown tool"}}` + "\n"))
	}
}

func (s *server) reply(id []byte, result string) {
	if id == nil {
		return
	}
	b := make([]byte, 0, len(id)+len(result)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	s.w.send(append(b, "}\n"...))
}

// writer is the one writer: frames are written whole, in the order sent,
// and flushed when no more are waiting.
type writer struct {
	frames chan []byte
	done   chan struct{}
}

func newWriter(out io.Writer) *writer {
	w := &writer{frames: make(chan []byte, 1024), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		bw := bufio.NewWriterSize(out, 64<<10)
		for f := range w.frames {
			if _, err := bw.Write(f); err != nil {
				os.Exit(1) // the reader is gone: nothing more to do
			}
			if len(w.frames) == 0 {
				if err := bw.Flush(); err != nil {
					os.Exit(1)
				}
			}
		}
		_ = bw.Flush()
	}()
	return w
}

func (w *writer) send(frame []byte) { w.frames <- frame }

func (w *writer) close() {
	close(w.frames)
	<-w.done
}
