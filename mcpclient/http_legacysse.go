package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The HTTP+SSE transport of 2024-11-05 (its transports page, "HTTP with
// SSE"): a GET opens an event stream whose first event, endpoint, names
// where to POST messages; every message of the server's, answers
// included, comes on that stream, whose end is the end of the connection.

// openSSE opens the event stream and waits, within ctx, for its endpoint
// event; the stream then runs on a goroutine of its own.
func (s *httpStream) openSSE(ctx context.Context) error {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.url.String(), nil)
	if err != nil {
		return err
	}
	s.headers(req)
	req.Header.Set("Accept", "text/event-stream")
	type opened struct {
		resp *http.Response
		err  error
	}
	got := make(chan opened, 1)
	go func() {
		resp, err := s.hc.Do(req)
		got <- opened{resp, err}
	}()
	var resp *http.Response
	select {
	case o := <-got:
		if o.err != nil {
			return s.describe(o.err)
		}
		resp = o.resp
	case <-ctx.Done():
		s.cancel()
		if o := <-got; o.resp != nil {
			o.resp.Body.Close()
		}
		return fmt.Errorf("%s did not open its event stream in time: %w", s.shown, ctx.Err())
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		body := peekBody(resp)
		resp.Body.Close()
		return s.remoteError(resp.StatusCode, "", body)
	}
	ready := make(chan error, 1)
	if !s.goRun(func() { s.serveSSE(resp, ready) }) {
		resp.Body.Close()
		return errStreamClosed
	}
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		err := fmt.Errorf("%s sent no endpoint event in time: %w", s.shown, ctx.Err())
		s.end(err)
		return err
	}
}

// serveSSE reads the event stream: its endpoint first (reported on
// ready), then the server's messages, until it ends, which ends the
// connection.
func (s *httpStream) serveSSE(resp *http.Response, ready chan<- error) {
	defer resp.Body.Close()
	r := newSSEReader(resp.Body, s.limit)
	ev, err := r.next()
	if err == nil && ev.typ != "endpoint" {
		err = fmt.Errorf("%s sent a %q event first, not endpoint: it is not an HTTP+SSE MCP server", s.shown, ev.typ)
	}
	var endpoint *url.URL
	if err == nil {
		endpoint, err = s.endpointURL(string(bytes.TrimSpace(ev.data)))
	} else if !strings.Contains(err.Error(), s.shown) {
		err = fmt.Errorf("%s closed its event stream before sending its endpoint: %w", s.shown, err)
	}
	if err != nil {
		ready <- err
		return
	}
	s.mu.Lock()
	s.mode, s.endpoint = modeSSE, endpoint
	s.mu.Unlock()
	ready <- nil
	for {
		ev, err := r.next()
		if err != nil {
			if s.ctx.Err() == nil {
				if errors.Is(err, errEventTooLong) {
					s.lost(fmt.Errorf("its event stream: %w", err))
				} else {
					s.lost(errors.New("the event stream ended"))
				}
			}
			return
		}
		if !s.handOn(ev) {
			return
		}
	}
}

// endpointURL resolves the endpoint event's URI against the stream's URL.
// It must be of the same origin: the configured headers and the tokens are
// the server's, never another's.
func (s *httpStream) endpointURL(ref string) (*url.URL, error) {
	u, err := s.url.Parse(ref)
	if err != nil || ref == "" {
		return nil, fmt.Errorf("%s sent an endpoint that is not a URL", s.shown)
	}
	if u.Scheme != s.url.Scheme || u.Host != s.url.Host {
		return nil, fmt.Errorf("%s named an endpoint of another origin (%s); refused: the server's headers and tokens go to it alone", s.shown, RedactURL(u.Scheme+"://"+u.Host))
	}
	return u, nil
}

// fallBackToSSE follows the 2025 specifications' backward compatibility
// rule: an initialize answered 400, 404 or 405 (without a JSON-RPC error
// of its own) by a server that opens an event stream with an endpoint
// event on GET is a 2024-11-05 server; initialize is then sent to the
// endpoint. It reports whether it switched (resp is then closed); resp is
// left readable otherwise.
func (s *httpStream) fallBackToSSE(p *post, resp *http.Response) bool {
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	switch {
	case p.m.Method != "initialize" || mode != modeLegacy:
		return false
	case resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed:
		return false
	}
	if _, answered := errorFor(peekBody(resp), p.m.ID); answered {
		return false
	}
	if err := s.openSSE(p.ctx); err != nil {
		s.log.Debug("remote server refused initialize and offers no HTTP+SSE stream", "url", s.shown, "status", resp.StatusCode, "err", err)
		if s.ctx.Err() != nil {
			return true // openSSE ended the stream
		}
		return false
	}
	discardBody(resp)
	s.log.Info("remote server speaks the HTTP+SSE transport of 2024-11-05", "url", s.shown)
	return true
}
