package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// A legacy request before initialize says what to do (docs/protocol.md
// §2), naming
// only what the enabled versions allow; with no legacy version enabled
// initialize is refused too, and the message stays bare.
func TestNotInitializedMessage(t *testing.T) {
	for _, tc := range []struct {
		versions []string
		want     string
	}{
		{nil, "No configured protocol dialect recognized the request. Send initialize first (or use 2026-07-28 _meta)"},
		{[]string{protocol.Version20250618}, "No configured protocol dialect recognized the request. Send initialize first"},
		{[]string{protocol.Version2026}, "No configured protocol dialect recognized the request"},
	} {
		s, err := New(Options{Versions: tc.versions})
		if err != nil {
			t.Fatal(err)
		}
		o := s.Dispatch(context.Background(), &Request{ID: protocol.IntID(1), Method: "tools/list", Params: json.RawMessage(`{}`)})
		if o.Err == nil || o.Err.Code != protocol.CodeInvalidRequest || o.Err.Message != tc.want {
			t.Errorf("versions %v: %+v, want -32600 %q", tc.versions, o.Err, tc.want)
		}
		if o := s.Dispatch(context.Background(), &Request{ID: protocol.IntID(2), Method: "ping"}); o.Err != nil {
			t.Errorf("versions %v: ping before initialize: %+v", tc.versions, o.Err)
		}
	}
}
