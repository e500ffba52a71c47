package server

import (
	"encoding/json"

	"github.com/snodod/snodod/protocol"
)

// Tool results are the hot path of most sessions, and a large text result
// went through four copies under reflection (the block's MarshalJSON, the
// encoder's buffer, its compaction, the frame). These append them straight
// into the frame, byte for byte as the reflective encoding would (a test
// holds them to it).

// AppendJSON implements protocol.Appender.
func (w callToolWire) AppendJSON(b []byte) ([]byte, error) { return w.AppendJSONSpliced(b, nil) }

// AppendJSONSpliced implements protocol.SplicingAppender: a large text
// block's text may be spliced into the frame as it is written instead of
// copied into it.
func (w callToolWire) AppendJSONSpliced(b []byte, sp *protocol.Splices) ([]byte, error) {
	var err error
	b = append(b, '{')
	if w.ResultType != "" {
		b = append(b, `"resultType":`...)
		b = protocol.AppendString(b, w.ResultType)
		b = append(b, ',')
	}
	b = append(b, `"content":[`...)
	for i, c := range w.Content {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = c.appendJSON(b, sp); err != nil {
			return nil, err
		}
	}
	b = append(b, ']')
	if len(w.StructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		if b, err = protocol.AppendValue(b, w.StructuredContent); err != nil {
			return nil, err
		}
	}
	if w.IsError {
		b = append(b, `,"isError":true`...)
	} else {
		b = append(b, `,"isError":false`...)
	}
	switch meta := w.Meta.(type) {
	case nil:
	case json.RawMessage: // encoded by the protocol encoder already
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	default:
		if m, ok := meta.(map[string]any); ok && len(m) == 0 {
			break
		}
		b = append(b, `,"_meta":`...)
		if b, err = protocol.AppendValue(b, meta); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSON appends a text block directly (its text spliced into sp when
// large) and any other block through its MarshalJSON.
func (c Content) appendJSON(b []byte, sp *protocol.Splices) ([]byte, error) {
	if c.Type != "text" || c.Annotations != nil || c.Meta != nil {
		return protocol.AppendValue(b, contentValue{c})
	}
	b = append(b, `{"type":"text","text":`...)
	b = protocol.AppendStringSpliced(b, c.Text, sp)
	return append(b, '}'), nil
}

// contentValue hides Content's appendJSON from AppendValue's Appender
// check, so the general path is encoding/json with Content's MarshalJSON.
type contentValue struct{ c Content }

func (v contentValue) MarshalJSON() ([]byte, error) { return v.c.MarshalJSON() }
