package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/snodod/snodod/mcpclient/oauth"
)

// The eras of a remote stream, decided by what the Conn sends: an
// initialize makes it legacy, a request stamped with 2026 _meta is modern.
const (
	modeUnknown = iota
	modeModern
	modeLegacy
	modeSSE // 2024-11-05: the endpoint of a GET stream
)

// httpStream is an HTTP's stream: the messages of every response (a POST's
// JSON or SSE, the session's GET stream, a resumption) are Read in the
// order each stream delivers them.
//
// Goroutines: one per message being POSTed, for as long as its answer
// streams (the requests in flight are bounded by the caller: the
// instance's max_in_flight), except a 2026 request's, POSTed on its
// caller's goroutine (sendWait); the session's GET stream, or the 2024-11-05
// stream; and one that finishes the stream once it ends. All end before
// done is closed.
type httpStream struct {
	t       HTTP
	url     *url.URL
	shown   string // url as errors show it
	name    string
	limit   int
	log     *slog.Logger
	tooLong func(TooLongError)
	hc      *http.Client

	ctx    context.Context // the stream's life
	cancel context.CancelFunc

	in       chan []byte // messages for Read
	final    error       // Read's final error, on Read's goroutine
	readDone chan struct{}
	done     chan struct{}
	err      error // set before done closes

	mu      sync.Mutex
	wg      sync.WaitGroup
	closing bool
	endErr  error
	mode    int
	posts   map[*Outgoing]*post // requests under way
	// barrier is closed once the last notification sent (other than a
	// cancellation) was acknowledged: what is sent after it waits, so
	// that notifications/initialized reaches the server before the
	// requests that follow (separate POSTs are not ordered otherwise).
	barrier  chan struct{}
	waiting  map[int64]*post // the same, by id, until answered
	sess     legacySession
	endpoint *url.URL                       // 2024-11-05
	params   map[string]map[string][]string // 2026: each tool's Mcp-Param headers
}

// post is one request under way.
type post struct {
	m        *Outgoing
	ctx      context.Context
	cancel   context.CancelFunc
	started  bool          // its POST began: the server may have it
	gen      int           // the legacy session it was sent in
	session  string        // that session's id
	answered chan struct{} // closed when its answer was read, on any stream
	// pushed: a message of its own stream went to Read (on the goroutine
	// that reads that stream, the only one that uses it).
	pushed bool
}

// errStreamClosed is the end of a stream its Conn closed.
var errStreamClosed = errors.New("the connection was closed")

func newHTTPStream(t HTTP, u *url.URL, l Link) *httpStream {
	o := l.Options
	s := &httpStream{
		t: t, url: u, shown: RedactURL(t.URL), name: o.Name, limit: o.MaxLineBytes,
		log: o.Logger.With("upstream", o.Name), tooLong: l.TooLong, hc: t.Client,
		in:       make(chan []byte, 64),
		readDone: make(chan struct{}),
		done:     make(chan struct{}),
		posts:    map[*Outgoing]*post{},
		waiting:  map[int64]*post{},
		params:   map[string]map[string][]string{},
	}
	if s.hc == nil {
		base, err := NewHTTPTransport("")
		if err != nil {
			base = http.DefaultTransport.(*http.Transport).Clone()
		}
		s.hc = &http.Client{Transport: base}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.finish()
	return s
}

// finish waits for the stream's end and the end of its goroutines, then
// ends Read and closes done.
func (s *httpStream) finish() {
	<-s.ctx.Done()
	s.wg.Wait()
	close(s.in)
	<-s.readDone
	s.mu.Lock()
	err := s.endErr
	s.mu.Unlock()
	s.err = &ExitError{Code: -1, Err: err}
	close(s.done)
}

// end ends the stream with err (the first one counts): every goroutine
// stops, the calls in flight get it through the Conn.
func (s *httpStream) end(err error) {
	s.mu.Lock()
	if s.endErr == nil {
		s.endErr = err
	}
	s.closing = true
	s.mu.Unlock()
	s.cancel()
}

// lost ends the stream because the server cannot be reached.
func (s *httpStream) lost(err error) {
	if s.ctx.Err() != nil {
		return
	}
	err = s.describe(err)
	s.log.Warn("remote server unreachable; the connection ends", "url", s.shown, "err", err)
	s.end(err)
}

// describe words a request's failure with the server's URL once, and
// without the request's own URL (which may hold a secret in its query).
func (s *httpStream) describe(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("cannot reach %s: %w", s.shown, err)
}

// go runs f as one of the stream's goroutines, unless it is closing.
func (s *httpStream) goRun(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Read returns the next message of any of the server's streams.
func (s *httpStream) Read() ([]byte, error) {
	if s.final == nil {
		if m, ok := <-s.in; ok {
			return m, nil
		}
		s.final = io.EOF
		close(s.readDone)
	}
	return nil, s.final
}

// push hands a message to Read; false once the stream is ending.
func (s *httpStream) push(m []byte) bool {
	select {
	case s.in <- m:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// Send POSTs m on a goroutine of its own.
func (s *httpStream) Send(m *Outgoing) bool {
	run, ok := s.enqueue(m)
	if !ok {
		return false
	}
	go func() {
		defer s.wg.Done()
		run()
	}()
	return true
}

// sendWait is Send on the caller's goroutine: it POSTs request m and reads
// its answer's stream before it returns (the waitingSender of Conn.Call).
// Only in 2026, where a request is its own exchange: a legacy request may
// wait on its session's renewal, which its caller's cancellation does not
// end, so it is sent as Send sends it.
func (s *httpStream) sendWait(m *Outgoing, queued func()) bool {
	s.mu.Lock()
	modern := s.mode == modeModern
	s.mu.Unlock()
	if !modern || m.ID == 0 {
		if !s.Send(m) {
			return false
		}
		queued()
		return true
	}
	run, ok := s.enqueue(m)
	if !ok {
		return false
	}
	defer s.wg.Done()
	queued()
	run()
	return true
}

// enqueue puts m in the tables and returns what POSTs it, counted in wg
// (its caller runs it, then calls wg.Done); false once the stream is
// closing.
func (s *httpStream) enqueue(m *Outgoing) (run func(), ok bool) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, false
	}
	var p *post
	if m.ID != 0 {
		p = &post{m: m, answered: make(chan struct{})}
		p.ctx, p.cancel = context.WithCancel(s.ctx)
		s.posts[m] = p
		s.waiting[m.ID] = p
	}
	switch {
	case m.Method == "initialize" && s.mode != modeSSE:
		s.mode = modeLegacy
		s.sess.initFrame, s.sess.initID = m.Data, m.ID
	case s.mode == modeUnknown && m.ID != 0 && m.Method != "server/discover":
		s.mode = modeModern // the Conn chose 2026: its requests after the probe
	}
	wait := s.barrier
	var done chan struct{}
	if m.ID == 0 && m.Method != "" && m.Method != "notifications/cancelled" {
		done = make(chan struct{})
		s.barrier = done
	}
	s.wg.Add(1)
	s.mu.Unlock()
	return func() {
		until := s.ctx
		if p != nil {
			defer s.forget(p)
			until = p.ctx // a request cancelled while it waits is not sent
		}
		if wait != nil {
			select {
			case <-wait:
			case <-until.Done():
				return
			}
		}
		if p == nil {
			if done != nil {
				defer close(done)
			}
			s.deliverMessage(m)
			return
		}
		s.deliverRequest(p)
	}, true
}

// forget takes a request that is over out of the tables.
func (s *httpStream) forget(p *post) {
	p.cancel()
	s.mu.Lock()
	delete(s.posts, p.m)
	if s.waiting[p.m.ID] == p {
		delete(s.waiting, p.m.ID)
	}
	s.mu.Unlock()
}

// Cancel withdraws a request not POSTed yet, or cancels one under way: in
// 2026 by closing its stream (the era's cancellation), otherwise with
// notifications/cancelled (and its stream is no longer read).
func (s *httpStream) Cancel(m *Outgoing, reason string) bool {
	s.mu.Lock()
	p := s.posts[m]
	mode := s.mode
	started := p != nil && p.started
	s.mu.Unlock()
	if p == nil {
		return false
	}
	p.cancel()
	if !started {
		return false
	}
	if mode == modeLegacy || mode == modeSSE {
		s.Send(&Outgoing{Data: cancelFrame(m.ID, reason), Method: "notifications/cancelled"})
	}
	return true
}

// Close deletes a legacy session (unless ctx has ended) and ends the
// stream.
func (s *httpStream) Close(ctx context.Context) {
	s.mu.Lock()
	first := !s.closing
	s.closing = true
	sess := s.sess.id
	s.mu.Unlock()
	if first && sess != "" && ctx.Err() == nil {
		s.deleteSession(ctx, sess)
	}
	s.end(errStreamClosed)
	<-s.done
}

func (s *httpStream) Done() <-chan struct{} { return s.done }

// Err is the stream's end, an *ExitError (Code -1) whose Err says why.
func (s *httpStream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// deliverMessage POSTs a notification or an answer; the server
// acknowledges it (202).
func (s *httpStream) deliverMessage(m *Outgoing) {
	for attempt := 0; ; attempt++ {
		resp, gen, err := s.post(s.ctx, m, nil)
		if err != nil {
			s.failed(s.ctx, m, err)
			return
		}
		discardBody(resp)
		switch {
		case resp.StatusCode < 300:
			if m.Method == "notifications/initialized" {
				s.initialized()
			}
			return
		case s.expiredSession(resp, gen, nil) && attempt == 0:
			if err := s.renewSession(gen); err != nil {
				return
			}
			if m.Method == "notifications/initialized" {
				return // the renewal sent its own
			}
		default:
			s.log.Warn("remote server refused a message", "url", s.shown, "method", m.Method, "status", resp.Status)
			return
		}
	}
}

// deliverRequest POSTs a request and reads its answer, resuming its
// stream, renewing an expired session, or failing the call.
func (s *httpStream) deliverRequest(p *post) {
	m := p.m
	for attempt := 0; ; attempt++ {
		resp, gen, err := s.post(p.ctx, m, p)
		if err != nil {
			s.failed(p.ctx, m, err)
			return
		}
		if s.fallBackToSSE(p, resp) {
			continue // sent again, to the endpoint
		}
		if s.expiredSession(resp, gen, p) {
			discardBody(resp)
			if attempt > 0 {
				m.Fail(s.remoteError(resp.StatusCode, "answered 404 for the session it had just opened", nil))
				return
			}
			if err := s.renewSession(gen); err != nil {
				return
			}
			continue // sent again on the new session: the old one never ran it
		}
		s.answer(p, resp)
		return
	}
}

// failed handles a message whose POST (under ctx) failed: its context
// ended (the call was cancelled, the stream closed), its authorization
// failed (a request's call fails, the stream stays), or the server is
// unreachable (the stream ends).
func (s *httpStream) failed(ctx context.Context, m *Outgoing, err error) {
	var oe *oauth.Error
	switch {
	case ctx.Err() != nil:
	case errors.As(err, &oe) && m.ID != 0:
		m.Fail(&RemoteError{URL: s.shown, Message: oe.Error(), Err: oe})
	case errors.As(err, &oe):
		s.log.Warn("remote server message not sent", "method", m.Method, "err", err)
	default:
		s.lost(err)
	}
}

// mediaType is a Content-Type without its parameters, lowered.
func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

func quoteType(ct string) string {
	if ct == "" {
		return "no Content-Type"
	}
	return fmt.Sprintf("%q", ct)
}

// printableText is the start of a plain-text body, one line of printable
// characters at most n long; "" for anything else.
func printableText(body []byte, n int) string {
	t := strings.TrimSpace(string(body))
	if t == "" || t[0] == '<' || t[0] == '{' || t[0] == '[' {
		return ""
	}
	var b strings.Builder
	for _, r := range t {
		if b.Len() >= n {
			b.WriteString("…")
			break
		}
		if r == '\n' || r == '\r' || r == '\t' {
			r = ' '
		}
		if r < 0x20 || r == 0x7f {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// discardBody reads a little of a body that is not used and closes it, so
// that its connection can be reused.
func discardBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
