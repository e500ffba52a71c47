package tracing_test

import (
	"context"
	"testing"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/tracing"
	"github.com/snodod/snodod/tracing/tracingtest"
)

// BenchmarkDispatchTraced is server's BenchmarkDispatchObserved's legacy
// echo call, its client sending a traceparent: with tracing off (no
// Observer), on (every span sampled and exported, in batches, to a
// receiver in the process), and on with OTEL_TRACES_SAMPLER=always_off.
func BenchmarkDispatchTraced(b *testing.B) {
	for _, mode := range []string{"off", "on", "sampled_out"} {
		b.Run(mode, func(b *testing.B) {
			s := echoServer(b)
			if mode != "off" {
				tracingtest.Start(b)
				if mode == "sampled_out" {
					b.Setenv("OTEL_TRACES_SAMPLER", "always_off")
				}
				tr, err := tracing.New(context.Background(), tracing.Options{})
				if err != nil || tr == nil {
					b.Fatal(tr, err)
				}
				b.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = tr.Shutdown(ctx)
				})
				s.SetObserver(tr)
			}
			msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench-1"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`))
			sess := server.NewSessionState(0)
			sess.SetNegotiated(protocol.Version20250618)
			req := &server.Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess,
				Header: map[string][]string{server.HeaderProtocolVersion: {protocol.Version20250618}}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if o := s.Dispatch(ctx, req); o.Err != nil {
					b.Fatal(o.Err)
				}
			}
		})
	}
}
