package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
)

// holder is a Handler that keeps every request unanswered until release.
type holder struct {
	mu   sync.Mutex
	held []*Request
}

func (*holder) Notify(string, json.RawMessage) {}

func (h *holder) Request(r *Request) {
	h.mu.Lock()
	h.held = append(h.held, r)
	h.mu.Unlock()
}

func (h *holder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

func (h *holder) release() {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, r := range held {
		r.Reply(nil, nil)
	}
}

// floodCounts is the fake's account of a flood.
type floodResult struct{ Sent, Answered, Refused, Failed int }

func floodOf(t *testing.T, c *Conn, args map[string]any) floodResult {
	t.Helper()
	var r floodResult
	b, _ := json.Marshal(callTool(t, c, "flood", args, CallOptions{}))
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Options.MaxServerRequests at its exact boundary (docs/upstreams.md §5): the
// Conn hands N requests to a Handler that keeps them, refuses the N+1th
// -32603 at once, and holds no goroutine for any of them.
func TestMaxServerRequests(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := &holder{}
			c := startFake(t, Options{Handler: h, MaxServerRequests: n})
			before := runtime.NumGoroutine()
			r := floodOf(t, c, map[string]any{"count": n, "methods": "sampling/createMessage"})
			eventually.True(t, "the requests handed over", func() bool { return h.count() == n })
			if r.Sent != n || r.Refused != 0 || c.Stats().RefusedRequests != 0 {
				t.Errorf("%d requests at the bound: %+v, %+v; want none refused", n, r, c.Stats())
			}
			if g := runtime.NumGoroutine(); g > before+2 {
				t.Errorf("goroutines %d → %d for %d held requests", before, g, n)
			}
			r = floodOf(t, c, map[string]any{"count": 1, "methods": "elicitation/create", "settle": 0})
			eventually.True(t, "the refusal", func() bool { return c.Stats().RefusedRequests == 1 })
			if h.count() != n {
				t.Errorf("the Handler holds %d, want %d", h.count(), n)
			}
			h.release()
			eventually.True(t, "the answers", func() bool {
				return floodOf(t, c, map[string]any{"count": 0, "ms": 0}).Answered == n
			})
			// Answered, the places are free again.
			floodOf(t, c, map[string]any{"count": n, "methods": "roots/list"})
			eventually.True(t, "the next ones handed over", func() bool { return h.count() == n })
			if s := c.Stats().RefusedRequests; s != 1 {
				t.Errorf("RefusedRequests = %d, want 1", s)
			}
			h.release()
		})
	}
}

// A flood of pings from a server that reads its answers is answered in
// full: each ping holds its place only until its answer is written.
func TestPingFlood(t *testing.T) {
	c := startFake(t, Options{MaxServerRequests: 2})
	r := floodOf(t, c, map[string]any{"count": 2000, "methods": "ping", "settle": 0})
	eventually.True(t, "every ping answered", func() bool {
		r = floodOf(t, c, map[string]any{"count": 0, "ms": 0})
		return r.Answered+r.Refused == 2000
	})
	t.Logf("2000 pings: %d answered, %d refused; %+v", r.Answered, r.Refused, c.Stats())
	if r.Answered == 0 {
		t.Error("no ping answered")
	}
}

// lineStream is a Stream of the test's: what it reads comes from lines,
// and what is sent waits, never written, as on the stdin of a server that
// stopped reading it.
type lineStream struct {
	lines chan []byte
	done  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	replies int
}

type lineTransport struct{ s *lineStream }

func (t lineTransport) Open(context.Context, Link) (Stream, error) { return t.s, nil }

func (s *lineStream) Read() ([]byte, error) {
	select {
	case l := <-s.lines:
		return l, nil
	case <-s.done:
		return nil, io.EOF
	}
}

func (s *lineStream) Send(m *Outgoing) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Reply {
		s.replies++
	}
	if m.ID != 0 { // the handshake's: answered at once
		go func() {
			answer := `{"jsonrpc":"2.0","id":` + fmt.Sprint(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"lines","version":"1"}}}`
			select {
			case s.lines <- []byte(answer):
			case <-s.done:
			}
		}()
	}
	return true
}

func (s *lineStream) queuedReplies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replies
}

func (s *lineStream) Cancel(*Outgoing, string) bool { return false }
func (s *lineStream) Close(context.Context)         { s.once.Do(func() { close(s.done) }) }
func (s *lineStream) Done() <-chan struct{}         { return s.done }
func (s *lineStream) Err() error                    { return io.EOF }

// A server that sends requests and never reads the answers: once
// MaxServerRequests answers wait unwritten, its requests are dropped, not
// even refused (a refusal would wait in the queue too), and counted; ping
// is no exception.
func TestRequestsOfAServerThatDoesNotRead(t *testing.T) {
	s := &lineStream{lines: make(chan []byte), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, lineTransport{s}, Options{Name: "lines", Protocol: "2025-11-25", MaxServerRequests: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer stopNow(c)
	for i := range 5 {
		s.lines <- []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"ping"}`, i))
	}
	s.lines <- []byte(`{"jsonrpc":"2.0","id":"bad\ud800","method":"ping"}`) // refused, were there room
	eventually.True(t, "the drops counted", func() bool { return c.Stats().DroppedRequests == 3 })
	if q := s.queuedReplies(); q != 3 {
		t.Errorf("%d answers queued, want the bound, 3", q)
	}
	// The handshake's initialized notification is not an answer: only
	// replies count.
	if st := c.Stats(); st.RefusedRequests != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A request with an id holding a lone surrogate is refused -32600 with a
// null id (docs/transport.md §5 row 6a), as the server end refuses a client's.
func TestServerRequestLoneSurrogateID(t *testing.T) {
	s := &lineStream{lines: make(chan []byte), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sent []string
	var mu sync.Mutex
	rec := &recordingStream{lineStream: s, sent: func(b []byte) { mu.Lock(); sent = append(sent, string(b)); mu.Unlock() }}
	c, err := Connect(ctx, lineTransport2{rec}, Options{Name: "lines", Protocol: "2025-11-25", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer stopNow(c)
	s.lines <- []byte(`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`)
	s.lines <- []byte(`{"jsonrpc":"2.0","id":"ok","method":"ping"}`)
	want := []string{
		string(protocol.AppendError(nil, protocol.ID{}, protocol.ErrIDSurrogate)),
		`{"jsonrpc":"2.0","id":"ok","result":{}}`,
	}
	eventually.True(t, "two answers", func() bool { mu.Lock(); defer mu.Unlock(); return len(sent) >= 2+2 })
	mu.Lock()
	defer mu.Unlock()
	got := sent[len(sent)-2:]
	for i := range want {
		if strings.TrimSpace(got[i]) != strings.TrimSpace(want[i]) {
			t.Errorf("answer %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// recordingStream is a lineStream that records what is sent.
type recordingStream struct {
	*lineStream
	sent func([]byte)
}

func (r *recordingStream) Send(m *Outgoing) bool {
	r.sent(m.Data)
	return r.lineStream.Send(m)
}

type lineTransport2 struct{ s *recordingStream }

func (t lineTransport2) Open(context.Context, Link) (Stream, error) { return t.s, nil }
