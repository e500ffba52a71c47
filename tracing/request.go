package tracing

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

var _ server.RequestStarter = (*Tracing)(nil)

// The attributes of snodod's spans. The mcp.*, gen_ai.*, jsonrpc.*,
// rpc.* and error.type ones are OpenTelemetry's semantic conventions for
// MCP (semantic-conventions-genai, docs/gen-ai/mcp.md, status
// Development); the snodod.* ones are snodod's own.
const (
	attrMethod      = attribute.Key("mcp.method.name")
	attrProtocol    = attribute.Key("mcp.protocol.version")
	attrResourceURI = attribute.Key("mcp.resource.uri")
	attrTool        = attribute.Key("gen_ai.tool.name")
	attrPrompt      = attribute.Key("gen_ai.prompt.name")
	attrOperation   = attribute.Key("gen_ai.operation.name")
	attrStatusCode  = attribute.Key("rpc.response.status_code")
	attrErrorType   = attribute.Key("error.type")
	attrView        = attribute.Key("snodod.view")
	attrKind        = attribute.Key("snodod.session.kind")
	attrEra         = attribute.Key("snodod.era")
	attrOutcome     = attribute.Key("snodod.outcome")
	attrUpstream    = attribute.Key("snodod.upstream")
)

// metaCarrier reads a request's trace context from its _meta members.
type metaCarrier protocol.Object

func (m metaCarrier) Get(key string) string {
	raw, ok := protocol.Object(m).Get(key)
	if !ok {
		return ""
	}
	s, _ := protocol.String(raw)
	return s
}

func (metaCarrier) Set(string, string) {}

func (m metaCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// RequestStarted starts the request's span, a child of the trace context
// its _meta carries (traceparent, tracestate), or the root of a new trace
// without one.
func (t *Tracing) RequestStarted(ctx context.Context, s *server.RequestStart) context.Context {
	if len(s.Meta) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(s.Meta))
	}
	era := "legacy"
	if s.Modern {
		era = "2026"
	}
	attrs := []attribute.KeyValue{attrMethod.String(s.Method), attrEra.String(era)}
	if c := s.Session.Caller(); c != nil {
		attrs = append(attrs, attrView.String(c.View))
		if c.Kind != "" {
			attrs = append(attrs, attrKind.String(c.Kind))
		}
	}
	if v := s.Session.Negotiated(); v != "" && !s.Modern {
		attrs = append(attrs, attrProtocol.String(v))
	}
	ctx, _ = t.tracer.Start(ctx, s.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx
}

// RequestEnded ends the request's span with what it was for and how it
// ended. Its name is the method and, for a tool or a prompt, its name
// ("tools/call echo"), as the conventions ask.
func (t *Tracing) RequestEnded(e server.RequestEnd) {
	if e.Context == nil {
		return
	}
	span := trace.SpanFromContext(e.Context)
	if !span.IsRecording() {
		span.End()
		return
	}
	if e.Item != "" {
		span.SetName(e.Method + " " + e.Item)
	}
	switch e.Method {
	case "tools/call":
		span.SetAttributes(attrOperation.String("execute_tool"))
		if e.Item != "" {
			span.SetAttributes(attrTool.String(e.Item))
		}
	case "prompts/get":
		if e.Item != "" {
			span.SetAttributes(attrPrompt.String(e.Item))
		}
	case "resources/read":
		span.SetAttributes(attrResourceURI.String(e.URI))
	}
	if e.Relayed && e.Owner != "" {
		span.SetAttributes(attrUpstream.String(e.Owner))
	}
	switch {
	case e.TimedOut:
		span.SetAttributes(attrOutcome.String("timed_out"), attrErrorType.String("timed_out"))
		span.SetStatus(codes.Error, "timed out")
	case e.Cancelled:
		span.SetAttributes(attrOutcome.String("cancelled"), attrErrorType.String("cancelled"))
	case e.Err != nil:
		code := strconv.FormatInt(e.Err.Code, 10)
		span.SetAttributes(attrOutcome.String("error"), attrStatusCode.String(code), attrErrorType.String(code))
		span.SetStatus(codes.Error, e.Err.Message)
	default:
		span.SetAttributes(attrOutcome.String("ok"))
	}
	span.End()
}
