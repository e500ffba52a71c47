package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// readStream reads SSE events until the answer to the request want:
// the other messages are dispatched (server requests answered, other
// answers handed to their requests, notifications dropped). A stream that
// ends first is resumed with a GET carrying Last-Event-ID, after the
// server's retry delay (SEP-1699), a few times; the answer may also come
// on the session's GET stream.
func (c *mcpClient) readStream(ctx context.Context, body io.Reader, want string, answer chan message) (json.RawMessage, error) {
	var lastID string
	retry := time.Second
	for resumes := 0; ; resumes++ {
		res, done, err := c.readEvents(ctx, body, want, &lastID, &retry)
		if done {
			return res, err
		}
		if lastID == "" || resumes == 3 {
			select {
			case m := <-answer:
				return result(m)
			default:
				return nil, errors.New("the stream ended without an answer")
			}
		}
		select {
		case m := <-answer:
			return result(m)
		case <-time.After(retry):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
		if err != nil {
			return nil, err
		}
		c.headers(req, "")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("resuming the stream: HTTP %d", resp.StatusCode)
		}
		body = resp.Body
	}
}

func result(m message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	return m.Result, nil
}

// readEvents reads one stream's events; done is false when it ended
// without the answer to want.
func (c *mcpClient) readEvents(ctx context.Context, body io.Reader, want string, lastID *string, retry *time.Duration) (json.RawMessage, bool, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "data":
				data = append(data, value)
			case "id":
				*lastID = value
			case "retry":
				if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
					*retry = time.Duration(ms) * time.Millisecond
				}
			}
			continue
		}
		payload := strings.Join(data, "\n")
		data = nil
		if strings.TrimSpace(payload) == "" {
			continue // a priming event
		}
		var m message
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return nil, true, fmt.Errorf("an event is not JSON-RPC: %w", err)
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			c.answer(ctx, m)
		case m.Method != "":
			// A notification: nothing to do with it here.
		case want != "" && string(m.ID) == want:
			res, err := result(m)
			return res, true, err
		default:
			c.mu.Lock()
			ch := c.pending[string(m.ID)]
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
				default:
				}
			}
		}
	}
	return nil, false, nil
}

// answer answers a server request received on a stream, by a POST.
func (c *mcpClient) answer(ctx context.Context, m message) {
	out := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	res, err := c.handle(m.Method, m.Params)
	if err != nil {
		out["error"] = map[string]any{"code": -32601, "message": err.Error()}
	} else {
		out["result"] = res
	}
	body, _ := json.Marshal(out)
	if err := c.post(ctx, "", body); err != nil {
		log.Printf("answering %s: %v", m.Method, err)
	}
}
