package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// flood {ms, count, methods, settle, hold}: a hosted server that floods its
// client with requests (docs/upstreams.md §5). During the call,
// the fake writes requests to its client with fresh ids ("flood-N"), as
// fast as it can, for ms milliseconds (default 1000) or until count of
// them (0: no count), cycling through methods (default
// sampling/createMessage, elicitation/create, roots/list, ping), never
// waiting for an answer and keeping nothing per request. After settle
// milliseconds more it answers structuredContent {sent, answered, refused,
// failed}: the answers so far that were results, -32603 errors, and other
// errors; with hold, it never answers (until the call is cancelled), so
// that the requests it made stay owned by a call in flight. A
// well-behaved client holds a bounded number of them and refuses the rest
// at once.

// floodCounts are the answers to flood requests, from every flood call.
type floodCounts struct {
	sent, answered, refused, failed atomic.Int64
}

var floodParams = map[string]json.RawMessage{
	"sampling/createMessage": json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"flood"}}],"maxTokens":1}`),
	"elicitation/create":     json.RawMessage(`{"message":"flood","requestedSchema":{"type":"object","properties":{}}}`),
}

func (s *server) flood(ctx context.Context, a args) (map[string]any, bool) {
	methods := []string{"sampling/createMessage", "elicitation/create", "roots/list", "ping"}
	if raw := a.str("methods"); raw != "" {
		methods = strings.Split(raw, ",")
	}
	count := a.int("count", 0)
	deadline := time.Now().Add(time.Duration(a.int("ms", 1000)) * time.Millisecond)
	before := s.floods.sent.Load()
	for i := 0; (count == 0 || i < count) && time.Now().Before(deadline); i++ {
		n := s.floods.sent.Add(1)
		method := methods[i%len(methods)]
		b := []byte(`{"jsonrpc":"2.0","id":"flood-` + strconv.FormatInt(n, 10) + `","method":"` + method + `"`)
		if p := floodParams[method]; p != nil {
			b = append(append(b, `,"params":`...), p...)
		}
		s.writeLine(append(b, '}'))
	}
	if a.bool("hold") {
		<-ctx.Done()
		return nil, false
	}
	sleep(time.Duration(a.int("settle", 0)) * time.Millisecond)
	return structured(map[string]any{
		"sent":     s.floods.sent.Load() - before,
		"answered": s.floods.answered.Load(),
		"refused":  s.floods.refused.Load(),
		"failed":   s.floods.failed.Load(),
	}), true
}

// floodAnswer counts the answer to a flood request; it reports false for
// any other message.
func (s *server) floodAnswer(m message) bool {
	if !bytes.HasPrefix(m.ID, []byte(`"flood-`)) {
		return false
	}
	var e struct {
		Code int `json:"code"`
	}
	switch {
	case m.Error == nil:
		s.floods.answered.Add(1)
	case json.Unmarshal(m.Error, &e) == nil && e.Code == -32603:
		s.floods.refused.Add(1)
	default:
		s.floods.failed.Add(1)
	}
	return true
}
