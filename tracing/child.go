package tracing

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/snodod/snodod/protocol"
)

// Active reports whether ctx carries a span context, as a request's
// context does when tracing is on: a context lookup, no allocation.
func Active(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid()
}

// Span is a child span of a request's: a call to another server or an
// exec run. A nil *Span is tracing off: its methods do nothing.
type Span struct {
	span trace.Span
}

// StartUpstream starts the span of one call of method to upstream name
// (a hosted server, or a remote one), a child of the request span in
// ctx, with target the tool's or prompt's name there ("" for none). It
// returns ctx unchanged and nil when ctx carries no span context (tracing
// is off): a context lookup, no allocation. The span's context, a child
// of ctx's, is what Parent hands to the upstream.
func StartUpstream(ctx context.Context, name, method, target string) (context.Context, *Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, nil
	}
	spanName := method
	attrs := []attribute.KeyValue{attrMethod.String(method), attrUpstream.String(name)}
	if target != "" {
		spanName += " " + target
		switch method {
		case "tools/call":
			attrs = append(attrs, attrTool.String(target), attrOperation.String("execute_tool"))
		case "prompts/get":
			attrs = append(attrs, attrPrompt.String(target))
		}
	}
	ctx, span := parent.TracerProvider().Tracer(scope).Start(ctx, spanName,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &Span{span: span}
}

// StartExec starts the span of one exec run of tool, a child of the
// request span in ctx; nil when ctx has none (as StartUpstream).
func StartExec(ctx context.Context, tool string) (context.Context, *Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, nil
	}
	ctx, span := parent.TracerProvider().Tracer(scope).Start(ctx, "exec "+tool,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrTool.String(tool)))
	return ctx, &Span{span: span}
}

// SetExit records an exec run's exit status (-1: killed by a signal or
// never started).
func (s *Span) SetExit(code int) {
	if s == nil {
		return
	}
	s.span.SetAttributes(attribute.Int("process.exit.code", code))
}

// End ends the span; err, when non-nil, is how the call failed: a
// JSON-RPC error's code is its rpc.response.status_code and error.type,
// any other error's type is "error" (or "cancelled", "timed_out").
func (s *Span) End(err error) {
	if s == nil {
		return
	}
	if err != nil && s.span.IsRecording() {
		var perr *protocol.Error
		switch {
		case errors.As(err, &perr):
			code := strconv.FormatInt(perr.Code, 10)
			s.span.SetAttributes(attrStatusCode.String(code), attrErrorType.String(code))
		case errors.Is(err, context.Canceled):
			s.span.SetAttributes(attrErrorType.String("cancelled"))
		case errors.Is(err, context.DeadlineExceeded):
			s.span.SetAttributes(attrErrorType.String("timed_out"))
		default:
			s.span.SetAttributes(attrErrorType.String("error"))
		}
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// EndRun ends an exec run's span: failed is a result with isError (the
// program failed, timed out, or could not start), err the call's error
// (cancelled).
func (s *Span) EndRun(failed bool, err error) {
	if s == nil {
		return
	}
	if err == nil && failed && s.span.IsRecording() {
		s.span.SetAttributes(attrErrorType.String("tool_error"))
		s.span.SetStatus(codes.Error, "the tool's result is an error")
	}
	s.End(err)
}

// Environ is ctx's span context as the environment variables a program
// started for it inherits (TRACEPARENT, TRACESTATE: OpenTelemetry's
// environment-variable carriers); nil without one.
func Environ(ctx context.Context) []string {
	tp, ts := Parent(ctx)
	if tp == "" {
		return nil
	}
	env := []string{"TRACEPARENT=" + tp}
	if ts != "" {
		env = append(env, "TRACESTATE="+ts)
	}
	return env
}

// Parent is the W3C trace context to hand to the next server for ctx's
// span: its traceparent and tracestate ("" when ctx has no valid span
// context).
func Parent(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}
