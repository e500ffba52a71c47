package daemon

import (
	"context"
	"time"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/tracing"
)

// The traces (docs/observability.md, "Traces"): on when the environment
// names an OTLP endpoint, off otherwise, when no runtime gets a
// RequestStarter and a request does no tracing work at all.

// tracingFlushBound bounds the export of the spans left when Run ends.
const tracingFlushBound = 5 * time.Second

// newTracing makes the tracer provider when the environment asks for
// one. A configuration of the exporter the SDK refuses is logged, and
// the daemon runs without traces: they are not worth refusing to serve.
func (d *Daemon) newTracing() {
	t, err := tracing.New(context.Background(), tracing.Options{Version: d.version(), Logger: d.log})
	if err != nil {
		d.log.Error("traces are off", "err", err)
		return
	}
	if t != nil {
		d.log.Info("traces are exported over OTLP (OTEL_EXPORTER_OTLP_* environment)")
	}
	d.tracing = t
}

// flushTracing exports the spans still buffered, once the sessions have
// ended (the drain, an upgrade's included), and stops the exporter; New
// calls it too when it fails after making the provider.
func (d *Daemon) flushTracing() {
	if d.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushBound)
	defer cancel()
	if err := d.tracing.Shutdown(ctx); err != nil {
		d.log.Warn("tracing: the last spans were not exported", "err", err)
	}
}

// withTracing is o with the traces added: o itself without them, the
// tracer alone without o.
func (d *Daemon) withTracing(o server.Observer) server.Observer {
	switch {
	case d.tracing == nil:
		return o
	case o == nil:
		return d.tracing
	}
	return tracedObserver{o: o, t: d.tracing}
}

// tracedObserver tells the tracer and another Observer (the metrics).
type tracedObserver struct {
	o server.Observer
	t *tracing.Tracing
}

func (x tracedObserver) RequestStarted(ctx context.Context, s *server.RequestStart) context.Context {
	return x.t.RequestStarted(ctx, s)
}

func (x tracedObserver) RequestEnded(e server.RequestEnd) {
	x.o.RequestEnded(e)
	x.t.RequestEnded(e)
}
