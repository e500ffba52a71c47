package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/snodod/snodod/protocol"
)

// A POST's answer read: a JSON body (readJSON), a refusal's status
// (refused), and each message handed to its call or the connection's
// reader (dispatch); the SSE answer is http_post.go's.

// answer reads the answer of a request from its response.
func (s *httpStream) answer(p *post, resp *http.Response) {
	defer resp.Body.Close()
	ct := mediaType(resp.Header.Get("Content-Type"))
	s.mu.Lock()
	viaStream := s.mode == modeSSE
	s.mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusAccepted, viaStream && resp.StatusCode < 300:
		// Some servers answer on the GET stream; the call waits there.
		select {
		case <-p.answered:
		case <-p.ctx.Done():
		}
	case resp.StatusCode < 300 && ct == "text/event-stream":
		s.readEvents(p, resp)
	case resp.StatusCode < 300 && ct == "application/json":
		s.readJSON(p, resp)
	case resp.StatusCode < 300:
		p.m.Fail(s.remoteError(resp.StatusCode, "answered with "+quoteType(ct)+", not JSON or an event stream", nil))
	default:
		s.refused(p, resp)
	}
}

// readJSON reads a JSON answer: one message (or a batch of them), at most
// the message limit.
func (s *httpStream) readJSON(p *post, resp *http.Response) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(s.limit)+1))
	switch {
	case p.ctx.Err() != nil:
		return
	case err != nil:
		s.lost(err)
		return
	case len(body) > s.limit:
		s.tooLong(TooLongError{ID: p.m.ID, HasID: true})
		return
	}
	for _, msg := range splitBatch(body) {
		if !s.dispatch(msg, p) {
			return
		}
	}
	select {
	case <-p.answered:
	default:
		p.m.Fail(s.remoteError(resp.StatusCode, "answered without a JSON-RPC response", nil))
	}
}

// refused handles an error status: a JSON-RPC error in the body answers
// the request (a 2026 server's 400 or 404, a legacy server's refusal);
// anything else fails it, naming the status.
func (s *httpStream) refused(p *post, resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if p.ctx.Err() != nil {
		return
	}
	if msg, ok := errorFor(body, p.m.ID); ok {
		s.dispatch(msg, p)
		return
	}
	p.m.Fail(s.remoteError(resp.StatusCode, "", body))
}

// remoteError words an HTTP status: "https://x/mcp answered 502 Bad
// Gateway: <the start of a plain-text body>".
func (s *httpStream) remoteError(status int, what string, body []byte) *RemoteError {
	msg := s.shown + " answered " + strings.TrimSpace(fmt.Sprintf("%d %s", status, http.StatusText(status)))
	if what != "" {
		msg = s.shown + " " + what
	}
	if text := printableText(body, 200); text != "" {
		msg += ": " + text
	}
	return &RemoteError{URL: s.shown, Status: status, Message: msg}
}

// dispatch hands one message of a response to Read, noting the answers
// (and what the stream learns from them: a legacy session's version, a
// 2026 server's tool headers). It reports false once the stream is ending.
//
// The answer of from, when it is the first message of from's own stream
// (a JSON body, or an event stream without progress before it), goes to
// its call directly instead (Outgoing.answer): no hop to the Conn's
// reader and back, and no second decode (docs/bench.md, "Remote servers"). What came before it
// on the stream went through Read, so the answer follows it there too.
func (s *httpStream) dispatch(msg []byte, from *post) bool {
	d := protocol.DecodeFromServer(msg)
	if d.Kind == protocol.KindResponse {
		s.mu.Lock()
		var p *post
		if n, ok := intID(d.ID); ok {
			p = s.waiting[n]
			if p != nil {
				delete(s.waiting, n)
			}
		}
		s.mu.Unlock()
		if p != nil {
			s.mu.Lock()
			if p.gen == s.sess.gen {
				s.sess.okSince = true
			}
			s.mu.Unlock()
			s.learn(p.m, d.Result)
			defer close(p.answered)
			if p == from && !from.pushed && s.ctx.Err() == nil && p.m.answer(d) {
				return true
			}
		}
	}
	if from != nil {
		from.pushed = true
	}
	return s.push(msg)
}

// intID is the Conn's id a response names.
func intID(id protocol.ID) (int64, bool) {
	var buf [24]byte
	n, err := strconv.ParseInt(string(id.AppendJSON(buf[:0])), 10, 64)
	return n, err == nil && protocol.IntID(n) == id
}

// splitBatch returns the messages of a JSON body: the body, or the
// elements of a batch.
func splitBatch(body []byte) [][]byte {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '[' {
		return [][]byte{t}
	}
	var items []json.RawMessage
	if json.Unmarshal(t, &items) != nil {
		return [][]byte{t}
	}
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

// errorFor returns the JSON-RPC error of an error status's body as the
// answer to request id: when it names id, or no id (null: the server could
// not tell which request it refused).
func errorFor(body []byte, id int64) ([]byte, bool) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.JSONRPC != "2.0" || len(m.Error) == 0 || m.Error[0] != '{' {
		return nil, false
	}
	var n int64
	switch {
	case len(m.ID) == 0 || string(m.ID) == "null":
	case json.Unmarshal(m.ID, &n) == nil && n == id:
	default:
		return nil, false
	}
	b := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"error":`, id)
	b = append(b, m.Error...)
	return append(b, '}'), true
}
