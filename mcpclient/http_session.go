package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// legacySession is a Streamable HTTP session of the 2025 eras
// (2025-11-25, transports, "Session Management"): the id the server gave
// initialize's answer, the version it negotiated, and what renewing it
// needs. A server that gives no id has no session: its requests carry
// none, and it never expires one.
type legacySession struct {
	id      string // Mcp-Session-Id, "" before initialize's answer or without sessions
	version string // negotiated, for MCP-Protocol-Version
	gen     int    // sessions opened before this one

	initFrame []byte // the Conn's initialize, sent again to renew the session
	initID    int64

	renewing  chan struct{} // closed when the renewal under way ends
	renewErr  error
	renewed   bool // a renewal happened...
	okSince   bool // ...and a request was answered in the session it opened
	listening context.CancelFunc
}

// expiredSession reports whether resp says the session gen has expired: a
// 404 to a request that carried the session's id, unless its body is a
// JSON-RPC error naming request p (an answer, then).
func (s *httpStream) expiredSession(resp *http.Response, gen int, p *post) bool {
	s.mu.Lock()
	legacy, current := s.mode == modeLegacy, s.sess
	s.mu.Unlock()
	if !legacy || resp.StatusCode != http.StatusNotFound || (current.gen == gen && current.id == "") {
		return false
	}
	if p != nil && p.session == "" {
		return false
	}
	body := peekBody(resp)
	if p != nil && namesID(body, p.m.ID) {
		return false
	}
	return true
}

// namesID reports whether body is a JSON-RPC message with id id.
func namesID(body []byte, id int64) bool {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	var n int64
	return json.Unmarshal(body, &m) == nil && json.Unmarshal(m.ID, &n) == nil && n == id
}

// renewSession opens a new session after the server expired session gen,
// once for everyone who noticed: initialize sent again as the Conn sent it,
// its answer read here, notifications/initialized, the GET stream opened
// again. A server that expires the session it just opened, before
// answering anything in it, ends the stream: renewing again would loop. An
// error means the stream is ending.
func (s *httpStream) renewSession(gen int) error {
	s.mu.Lock()
	switch {
	case s.sess.gen != gen:
		s.mu.Unlock()
		return nil // renewed already
	case s.sess.renewing != nil:
		ch := s.sess.renewing
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.ctx.Done():
			return errStreamClosed
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.sess.renewErr
	case s.sess.renewed && !s.sess.okSince:
		s.mu.Unlock()
		err := fmt.Errorf("%s expired its session again before answering anything in the one opened after the last expiry", s.shown)
		s.end(err)
		return err
	}
	ch := make(chan struct{})
	s.sess.renewing = ch
	if s.sess.listening != nil {
		s.sess.listening()
		s.sess.listening = nil
	}
	frame, id := s.sess.initFrame, s.sess.initID
	s.mu.Unlock()
	s.log.Info("remote server expired its session; opening a new one", "url", s.shown)
	sid, version, err := s.openSession(frame, id)
	s.mu.Lock()
	s.sess.renewing, s.sess.renewErr = nil, err
	if err == nil {
		s.sess.gen++
		s.sess.id, s.sess.version = sid, version
		s.sess.renewed, s.sess.okSince = true, false
	}
	close(ch)
	s.mu.Unlock()
	if err != nil {
		if s.ctx.Err() == nil {
			err = fmt.Errorf("%s expired its session and a new one could not be opened: %w", s.shown, err)
			s.end(err)
		}
		return err
	}
	s.listen()
	return nil
}

// openSession performs initialize and notifications/initialized for a
// renewal, reading initialize's answer itself (the Conn has its own
// already).
func (s *httpStream) openSession(frame []byte, id int64) (sid, version string, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	req, err := s.newPost(ctx, s.url.String(), frame)
	if err != nil {
		return "", "", err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", "", s.describe(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return "", "", s.remoteError(resp.StatusCode, "", body)
	}
	sid = resp.Header.Get("Mcp-Session-Id")
	if !visibleASCII(sid) {
		sid = ""
	}
	answer, err := s.readAnswer(resp, id)
	if err != nil {
		return "", "", err
	}
	var r struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &r) != nil || r.Result == nil {
		return "", "", fmt.Errorf("%s refused initialize: %s", s.shown, printableText(answer, 200))
	}
	note := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	nreq, err := s.newPost(ctx, s.url.String(), note)
	if err != nil {
		return "", "", err
	}
	if sid != "" {
		nreq.Header.Set("Mcp-Session-Id", sid)
	}
	nreq.Header.Set("MCP-Protocol-Version", r.Result.ProtocolVersion)
	nresp, err := s.hc.Do(nreq)
	if err != nil {
		return "", "", s.describe(err)
	}
	discardBody(nresp)
	return sid, r.Result.ProtocolVersion, nil
}

// readAnswer reads the message with id id from a JSON or SSE answer,
// dropping the others (nothing the server says before a session is
// initialized is for anyone).
func (s *httpStream) readAnswer(resp *http.Response, id int64) ([]byte, error) {
	if mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(s.limit)+1))
		if err != nil || len(body) > s.limit {
			return nil, fmt.Errorf("%s answered initialize with a body over the message limit or cut short", s.shown)
		}
		return body, nil
	}
	r := newSSEReader(resp.Body, s.limit)
	for {
		ev, err := r.next()
		if err != nil {
			return nil, fmt.Errorf("%s closed its answer to initialize before sending it", s.shown)
		}
		if !ev.tooLong && namesID(ev.data, id) {
			return ev.data, nil
		}
	}
}

// listenWait bounds how long the first request of a session waits for its
// GET stream to be answered (docs/upstreams.md §9): what the server sends
// on it about the first requests (their answers, after a stream cut) then
// finds it open, and a server that sees the GET before them tells it
// from a resumption.
const listenWait = 2 * time.Second

// initialized follows notifications/initialized: the session's GET stream
// opens, and the next message waits for the server's answer to it (at most
// listenWait).
func (s *httpStream) initialized() {
	s.mu.Lock()
	legacy := s.mode == modeLegacy && s.sess.listening == nil
	s.mu.Unlock()
	if !legacy {
		return
	}
	opened := s.listen()
	t := time.NewTimer(listenWait)
	defer t.Stop()
	select {
	case <-opened:
	case <-t.C:
	case <-s.ctx.Done():
	}
}

// listen opens the session's GET stream, on which the server sends what
// belongs to no request of the client's (notifications, its own
// requests): it is opened again when it ends (after the server's retry
// delay, with Last-Event-ID, backing off while it fails), renews the
// session when the server says it expired, and ends for good when the
// server offers none (405). opened is closed once the server answered
// the first GET (or it failed).
func (s *httpStream) listen() (opened <-chan struct{}) {
	s.mu.Lock()
	ctx, cancel := context.WithCancel(s.ctx)
	s.sess.listening = cancel
	gen, sid, version := s.sess.gen, s.sess.id, s.sess.version
	s.mu.Unlock()
	first := make(chan struct{})
	var once sync.Once
	answered := func() { once.Do(func() { close(first) }) }
	if !s.goRun(func() {
		defer answered()
		defer cancel()
		lastID, retry, backoff := "", time.Duration(0), time.Duration(0)
		for ctx.Err() == nil {
			resp, err := s.openGET(ctx, sid, version, lastID)
			answered()
			got := false
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return
				}
			case resp.StatusCode == http.StatusMethodNotAllowed:
				discardBody(resp)
				return // the server offers no GET stream
			case resp.StatusCode == http.StatusNotFound && sid != "":
				discardBody(resp)
				go func() { _ = s.renewSession(gen) }() // it opens the next stream
				return
			case resp.StatusCode == http.StatusOK && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream":
				r := newSSEReader(resp.Body, s.limit)
				r.lastID = lastID
				got = s.readListen(r)
				resp.Body.Close()
				lastID = r.lastID
				if r.retry > 0 {
					retry = r.retry
				}
			default:
				discardBody(resp)
			}
			if got {
				backoff = 0
			} else {
				backoff = min(max(2*backoff, defaultRetry), maxListenBackoff)
			}
			wait := max(retry, backoff, defaultRetry/10)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}) {
		answered() // closing: nothing to wait for
	}
	return first
}

// openGET opens the session's GET stream.
func (s *httpStream) openGET(ctx context.Context, sid, version, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url.String(), nil)
	if err != nil {
		return nil, err
	}
	s.headers(req)
	req.Header.Set("Accept", "text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return s.hc.Do(req)
}

// readListen hands on the events of a GET stream until it ends; it
// reports whether any came.
func (s *httpStream) readListen(r *sseReader) bool {
	got := false
	for {
		ev, err := r.next()
		if err != nil {
			return got
		}
		got = true
		if !s.handOn(ev) {
			return got
		}
	}
}

// handOn hands on an event of a stream that belongs to no request (the
// GET stream, the 2024-11-05 stream): its message, or its id when it was
// over the limit. It reports false once the stream is ending.
func (s *httpStream) handOn(ev sseEvent) bool {
	switch {
	case ev.tooLong:
		id, ok := longLineID(ev.head, ev.tail)
		s.tooLong(TooLongError{ID: id, HasID: ok})
	case ev.typ == "message" && len(bytes.TrimSpace(ev.data)) > 0:
		return s.dispatch(ev.data, nil)
	}
	return true
}

// deleteSession ends the session at the server (2025-11-25: a client that
// no longer needs it SHOULD), within deleteTimeout; a server that does not
// allow it (405) is fine.
func (s *httpStream) deleteSession(ctx context.Context, sid string) {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.url.String(), nil)
	if err != nil {
		return
	}
	s.headers(req)
	req.Header.Set("Mcp-Session-Id", sid)
	s.mu.Lock()
	if v := s.sess.version; v != "" {
		req.Header.Set("MCP-Protocol-Version", v)
	}
	s.mu.Unlock()
	resp, err := s.hc.Do(req)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Debug("remote session not deleted", "url", s.shown, "err", s.describe(err))
		}
		return
	}
	discardBody(resp)
}
