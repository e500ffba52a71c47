// Package tracing is snodod's OpenTelemetry traces (docs/observability.md,
// "Traces"): a span per request the runtime serves, a child span per call
// to another server (a hosted one over stdio, a remote one over HTTP) and
// per exec run, exported over OTLP HTTP/protobuf.
//
// It is off unless the environment names an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT):
// then New returns nil, no runtime gets a RequestStarter, no request
// context carries a span, and the child spans' functions find none and
// return at once. Everything else the SDK reads from the standard OTEL_*
// variables itself (sampler, headers, timeouts, batching, resource).
//
// The W3C trace context travels in MCP's params._meta (traceparent,
// tracestate), as OpenTelemetry's semantic conventions for MCP recommend:
// taken from the client's request, and handed to the next server as the
// child span's, in its request's _meta and, over HTTP, in the traceparent
// and tracestate headers as well. The package never records argument
// values, results or session ids.
package tracing
