package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of snodod's spans.
const scope = "github.com/snodod/snodod"

// Options are what New needs besides the environment.
type Options struct {
	// Version is snodod's, the resource's service.version.
	Version string
	// Logger gets the exporter's errors, at most one a minute
	// (ErrorInterval); nil is slog.Default().
	Logger *slog.Logger
	// Getenv reads the environment; nil is os.Getenv. Only whether
	// tracing is on is read through it: the SDK reads the OTEL_*
	// variables from the process's environment itself.
	Getenv func(string) string
}

// ErrorInterval is the least time between two exporter errors logged.
const ErrorInterval = time.Minute

// Tracing is the daemon's tracer provider and the server.RequestStarter
// of its runtimes. Its methods may be called concurrently.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// Enabled reports whether the environment turns tracing on: an OTLP
// endpoint is set, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New makes the tracer provider the environment asks for, exporting over
// OTLP HTTP/protobuf in batches; nil, nil when tracing is off (Enabled).
// The exporter's errors go to o.Logger, at most one per ErrorInterval
// (OpenTelemetry's global error handler is set to do so). Shutdown
// flushes what is left.
func New(ctx context.Context, o Options) (*Tracing, error) {
	if !Enabled(o.Getenv) {
		return nil, nil
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	otel.SetErrorHandler(&errorLimiter{log: log, every: ErrorInterval})
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	// service.name is "snodod" unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise: the environment's come last.
	res, err := resource.Merge(resource.NewSchemaless(
		attribute.String("service.name", "snodod"),
		attribute.String("service.version", o.Version),
	), resource.Environment())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	// No sampler given: the SDK's, from OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{tp: tp, tracer: tp.Tracer(scope)}, nil
}

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx. It may be called more than once.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ForceFlush exports the spans buffered so far, within ctx.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	return t.tp.ForceFlush(ctx)
}

// errorLimiter is the global OpenTelemetry error handler: it logs the
// first error, then at most one per interval, with how many it dropped
// in between. A collector that is down must not fill the log.
type errorLimiter struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (l *errorLimiter) Handle(err error) {
	now := time.Now()
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	l.log.Warn("tracing: exporting spans failed", "err", err, "errors_not_logged", dropped)
}
