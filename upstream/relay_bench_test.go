package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// BenchmarkRelayedCall is one relayed tools/call through a pass-through
// view's Dispatcher to the fake upstream, without a transport: the
// Manager's and the runtime's part of the relay, plus the Conn's round trip.
func BenchmarkRelayedCall(b *testing.B) {
	h := newBenchHarness(b)
	ss, sess, _, release, err := h.open(b, 1, "fake", "")
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	if _, _, perr := sess.Initialize(ss, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}`)); perr != nil {
		b.Fatal(perr)
	}
	req := &server.Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`),
		State: ss, Header: http.Header{server.HeaderProtocolVersion: {"2025-11-25"}}}
	if o := sess.Dispatch(context.Background(), req); o.Err != nil {
		b.Fatal(o.Err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if o := sess.Dispatch(context.Background(), req); o.Err != nil {
			b.Fatal(o.Err)
		}
	}
}
