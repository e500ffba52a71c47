package mcpclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// post sends m: to the 2024-11-05 endpoint, or to the URL with the
// headers of its era (a legacy session's id and version; 2026's
// MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param). gen is the
// session it was sent in. p, for a request, is marked started.
func (s *httpStream) post(ctx context.Context, m *Outgoing, p *post) (*http.Response, int, error) {
	s.mu.Lock()
	mode, sess, endpoint := s.mode, s.sess, s.endpoint
	if p != nil {
		p.started = true
		p.gen, p.session = sess.gen, sess.id
	}
	s.mu.Unlock()
	target := s.url.String()
	if mode == modeSSE {
		target = endpoint.String()
	}
	req, err := s.newPost(ctx, target, m.Data)
	if err != nil {
		return nil, 0, err
	}
	if m.TraceParent != "" {
		req.Header.Set("Traceparent", m.TraceParent)
		if m.TraceState != "" {
			req.Header.Set("Tracestate", m.TraceState)
		}
	}
	switch mode {
	case modeSSE:
	case modeLegacy:
		if m.Method != "initialize" {
			if sess.id != "" {
				req.Header.Set("Mcp-Session-Id", sess.id)
			}
			if sess.version != "" {
				req.Header.Set("MCP-Protocol-Version", sess.version)
			}
		}
	default:
		if m.ID != 0 {
			s.modernHeaders(req, m)
		}
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, sess.gen, err
	}
	if m.Method == "initialize" && mode == modeLegacy && resp.StatusCode < 300 {
		s.mu.Lock()
		if id := resp.Header.Get("Mcp-Session-Id"); visibleASCII(id) {
			s.sess.id = id
		}
		s.mu.Unlock()
	}
	return resp, sess.gen, nil
}

// newPost is a POST of body to target with the configured headers and
// those of every MCP POST.
func (s *httpStream) newPost(ctx context.Context, target string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	s.headers(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}

// headers sets the configured headers on req.
func (s *httpStream) headers(req *http.Request) {
	for k, vs := range s.t.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
}

// visibleASCII reports whether a session id is one (2025-11-25,
// transports: visible ASCII only), and not empty.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// readEvents reads a request's SSE answer: its events handed on until its
// answer, and, in a legacy session, a stream cut before the answer resumed
// with a GET carrying Last-Event-ID, after the server's retry delay
// (2025-11-25, transports, "Resumability and Redelivery"). A 2026 stream,
// or a legacy one without event ids, cannot be resumed: its call fails.
func (s *httpStream) readEvents(p *post, resp *http.Response) {
	r := newSSEReader(resp.Body, s.limit)
	body := resp.Body
	defer func() { finishBody(body) }()
	empty := 0 // resumptions in a row that brought nothing
	for {
		progressed, over := s.drain(p, r)
		if over || p.ctx.Err() != nil || isClosed(p.answered) {
			return
		}
		s.mu.Lock()
		legacy := s.mode == modeLegacy
		s.mu.Unlock()
		switch {
		case !legacy:
			p.m.Fail(s.remoteError(0, "closed the response stream before answering", nil))
			return
		case r.lastID == "":
			p.m.Fail(s.remoteError(0, "closed the response stream before answering, and gave no event id to resume it", nil))
			return
		}
		if progressed {
			empty = 0
		} else if empty++; empty >= maxResumes {
			p.m.Fail(s.remoteError(0, "closed the response stream "+strconv.Itoa(maxResumes)+" times without sending anything", nil))
			return
		}
		wait := r.retry
		if wait <= 0 {
			wait = defaultRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.answered: // it came on the session's GET stream
			t.Stop()
			return
		case <-p.ctx.Done():
			t.Stop()
			return
		}
		next, ok := s.resume(p, r.lastID)
		if !ok {
			return
		}
		body.Close()
		body = next.Body
		nr := newSSEReader(next.Body, s.limit)
		nr.lastID, nr.retry = r.lastID, r.retry
		r = nr
	}
}

// drain reads events until the request's answer (over: nothing more to
// read for it) or the end of the stream; progressed says whether any
// event came.
func (s *httpStream) drain(p *post, r *sseReader) (progressed, over bool) {
	for {
		ev, err := r.next()
		if err != nil {
			return progressed, false
		}
		progressed = true
		switch {
		case ev.tooLong:
			id, ok := longLineID(ev.head, ev.tail)
			if !ok {
				// An event of the request's own stream too long to tell:
				// taken for its answer, so the call fails instead of
				// waiting for one that was dropped.
				id = p.m.ID
			}
			s.tooLong(TooLongError{ID: id, HasID: true})
			if id == p.m.ID {
				return true, true
			}
		case ev.typ != "message" || len(bytes.TrimSpace(ev.data)) == 0:
			// A priming event (an id alone), or one of no MCP type.
		default:
			if !s.dispatch(ev.data, p) {
				return true, true
			}
			if isClosed(p.answered) {
				return true, true
			}
		}
	}
}

// resume opens the GET that resumes a request's stream after lastID in
// the session it was sent in; false when the call is over (failed, or the
// stream ending).
func (s *httpStream) resume(p *post, lastID string) (*http.Response, bool) {
	req, err := http.NewRequestWithContext(p.ctx, http.MethodGet, s.url.String(), nil)
	if err != nil {
		p.m.Fail(err)
		return nil, false
	}
	s.headers(req)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	s.mu.Lock()
	version := s.sess.version
	s.mu.Unlock()
	if p.session != "" {
		req.Header.Set("Mcp-Session-Id", p.session)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.failed(p.ctx, p.m, err)
		return nil, false
	}
	switch {
	case resp.StatusCode == http.StatusOK && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream":
		return resp, true
	case resp.StatusCode == http.StatusNotFound && p.session != "":
		discardBody(resp)
		p.m.Fail(s.remoteError(http.StatusNotFound, "ended the session this request ran in before answering it (the request may have partly run)", nil))
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		e := s.remoteError(resp.StatusCode, "", body)
		e.Message = s.shown + " refused to resume a cut response stream: " + e.Message[len(s.shown)+1:]
		p.m.Fail(e)
	}
	return nil, false
}

// finishBody reads what is left of a response stream after its answer
// (the server ends it there), for a moment at most, and closes it: a body
// read to its end lets its connection serve the next request.
func finishBody(body io.ReadCloser) {
	t := time.AfterFunc(time.Second, func() { body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	t.Stop()
	body.Close()
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// peekBody reads a small error body and puts it back, for a second look.
func peekBody(resp *http.Response) []byte {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return body
}
