//go:build soak

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/daemon/control"
)

// The soak's sessions: one NDJSON line connection per socket, hand-over
// (descriptors passed with control.Client.Connect, as `snodod connect` does) and
// pty session, and a legacy Streamable HTTP session; each answers
// requests by id and counts the notifications it gets.

// soakAnswer is one request's outcome as a session saw it.
type soakAnswer struct {
	r        reply
	progress int // notifications/progress received for it first
}

// soakSession is what the soak drives; its methods may be called from the
// session's own goroutine only, except close.
type soakSession interface {
	// roundTrip sends line (a request with id) and waits for its answer.
	roundTrip(id int64, line string, timeout time.Duration) (soakAnswer, error)
	// cancel sends line and then, after a moment, its cancellation; an
	// answer that arrives afterwards is counted by the session as wrong.
	cancel(id int64, line string) error
	// updates counts the resource updates received.
	updates() int64
	// stray counts answers to requests never sent or already cancelled.
	stray() int64
	close()
}

// lineSession is a session over a byte stream.
type lineSession struct {
	w       io.Writer
	closeFn func()
	wmu     sync.Mutex

	mu        sync.Mutex
	pending   map[int64]chan soakAnswer
	progress  map[int64]int
	cancelled map[int64]bool

	nUpdates, nStray atomic.Int64
	done             chan struct{}
}

func newLineSession(r io.Reader, w io.Writer, closeFn func()) *lineSession {
	s := &lineSession{w: w, closeFn: closeFn, pending: map[int64]chan soakAnswer{},
		progress: map[int64]int{}, cancelled: map[int64]bool{}, done: make(chan struct{})}
	go s.read(r)
	return s
}

func (s *lineSession) read(r io.Reader) {
	defer close(s.done)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		s.handle(line)
	}
}

// handle routes one line: progress and updates are counted, answers go to
// the request waiting for them.
func (s *lineSession) handle(line []byte) {
	var m struct {
		reply
		Params struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		s.nStray.Add(1)
		return
	}
	switch m.Method {
	case "notifications/progress":
		var tok int64
		if json.Unmarshal(m.Params.ProgressToken, &tok) == nil {
			s.mu.Lock()
			_, inFlight := s.pending[tok]
			s.progress[tok]++
			s.mu.Unlock()
			if !inFlight {
				s.nStray.Add(1) // progress after its result (docs/transport.md §10.3)
			}
		}
		return
	case "notifications/resources/updated":
		s.nUpdates.Add(1)
		return
	case "":
	default:
		return // list changes after a reload
	}
	var id int64
	if json.Unmarshal(m.ID, &id) != nil {
		s.nStray.Add(1) // an error about no request (id null)
		return
	}
	s.mu.Lock()
	ch, ok := s.pending[id]
	delete(s.pending, id)
	n := s.progress[id]
	delete(s.progress, id)
	s.mu.Unlock()
	if !ok {
		s.nStray.Add(1) // answered after its cancellation, or never asked
		return
	}
	ch <- soakAnswer{r: m.reply, progress: n}
}

func (s *lineSession) write(line string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := io.WriteString(s.w, line+"\n")
	return err
}

func (s *lineSession) roundTrip(id int64, line string, timeout time.Duration) (soakAnswer, error) {
	ch := make(chan soakAnswer, 1)
	s.mu.Lock()
	s.pending[id] = ch
	s.mu.Unlock()
	if err := s.write(line); err != nil {
		return soakAnswer{}, err
	}
	select {
	case a := <-ch:
		return a, nil
	case <-s.done:
		return soakAnswer{}, io.EOF
	case <-time.After(timeout):
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return soakAnswer{}, fmt.Errorf("no answer to %d within %v", id, timeout)
	}
}

func (s *lineSession) cancel(id int64, line string) error {
	if err := s.write(line); err != nil {
		return err
	}
	time.Sleep(100 * time.Millisecond)
	return s.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id))
}

func (s *lineSession) updates() int64 { return s.nUpdates.Load() }
func (s *lineSession) stray() int64   { return s.nStray.Load() }
func (s *lineSession) close()         { s.closeFn(); <-s.done }

// initialize opens a legacy session on a line session.
func (s *lineSession) initialize() error {
	a, err := s.roundTrip(0, initializeLine(0, "2025-11-25"), answerWithin)
	if err != nil || a.r.Error != nil {
		return fmt.Errorf("initialize: %v %+v", err, a.r.Error)
	}
	return s.write(initializedLine)
}

// subscribe subscribes s to uri's updates.
func subscribe(s soakSession, uri string) error {
	sub := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":%q}}`, uri)
	if a, err := s.roundTrip(1, sub, answerWithin); err != nil || a.r.Error != nil {
		return fmt.Errorf("subscribe: %v %+v", err, a.r.Error)
	}
	return nil
}

func dialSoakSocket(path string) (soakSession, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return newLineSession(c, c, func() { c.Close() }), nil
}

// handOver passes a pipe pair to the daemon, as `snodod connect` started
// by a client does, and keeps the client's ends.
func handOver(sock string) (soakSession, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	h, err := (&control.Client{Socket: sock}).Connect(context.Background(), inR, outW, control.ConnectOptions{})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	return newLineSession(outR, inW, func() { inW.Close(); outR.Close(); h.Close() }), nil
}

// handOverPTY passes the terminal side of a new pty; the soak talks on its
// master, as a terminal emulator would.
func handOverPTY(sock string) (soakSession, error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		tty.Close()
		return nil, err
	}
	master := os.NewFile(uintptr(fd), "ptmx")
	h, err := (&control.Client{Socket: sock}).Connect(context.Background(), tty, tty, control.ConnectOptions{})
	tty.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	return newLineSession(master, master, func() { master.Close(); h.Close() }), nil
}

// httpSession is a legacy (2025-11-25) Streamable HTTP session: requests
// are POSTs carrying its Mcp-Session-Id, answered as JSON or, with
// progress, as an SSE stream; its GET stream brings the resource updates.
type httpSession struct {
	url, id  string
	client   *http.Client
	stream   io.Closer
	nUpdates atomic.Int64
	streamed chan struct{}
}

func dialSoakHTTP(url string) (*httpSession, error) {
	s := &httpSession{url: url, client: &http.Client{}, streamed: make(chan struct{})}
	req, _ := http.NewRequest("POST", url, strings.NewReader(initializeLine(0, "2025-11-25")))
	s.headers(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s.id = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != 200 || s.id == "" {
		return nil, fmt.Errorf("initialize over HTTP: %s", resp.Status)
	}
	if _, err := s.post(initializedLine); err != nil {
		return nil, err
	}
	get, _ := http.NewRequest("GET", url, nil)
	s.headers(get)
	get.Header.Set("Accept", "text/event-stream")
	resp, err = s.client.Do(get)
	if err != nil {
		return nil, err
	}
	s.stream = resp.Body
	go func() {
		defer close(s.streamed)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/resources/updated") {
				s.nUpdates.Add(1)
			}
		}
	}()
	return s, nil
}

func (s *httpSession) headers(req *http.Request) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
}

func (s *httpSession) post(line string) (*http.Response, error) {
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(line))
	s.headers(req)
	return s.client.Do(req)
}

func (s *httpSession) roundTrip(id int64, line string, timeout time.Duration) (soakAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url, strings.NewReader(line))
	s.headers(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return soakAnswer{}, err
	}
	defer resp.Body.Close()
	var a soakAnswer
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, err
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		err = json.Unmarshal(body, &a.r)
		return a, err
	}
	for _, l := range bytes.Split(body, []byte("\n")) {
		data, ok := bytes.CutPrefix(l, []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Contains(data, []byte(`"notifications/progress"`)) {
			a.progress++
			continue
		}
		if err := json.Unmarshal(data, &a.r); err == nil && string(a.r.ID) == fmt.Sprint(id) {
			return a, nil
		}
	}
	return a, fmt.Errorf("the stream of %d ended without its answer", id)
}

// cancel is not used over HTTP (the soak sends an echo instead).
func (s *httpSession) cancel(int64, string) error {
	return fmt.Errorf("the soak does not cancel over HTTP")
}

func (s *httpSession) updates() int64 { return s.nUpdates.Load() }
func (s *httpSession) stray() int64   { return 0 }
func (s *httpSession) close() {
	req, _ := http.NewRequest("DELETE", s.url, nil)
	s.headers(req)
	if resp, err := s.client.Do(req); err == nil {
		resp.Body.Close()
	}
	s.stream.Close()
	<-s.streamed
	s.client.CloseIdleConnections()
}
