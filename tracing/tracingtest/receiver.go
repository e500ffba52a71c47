// Package tracingtest is an OTLP receiver for tests: an HTTP server that
// decodes what an OTLP HTTP/protobuf exporter posts to /v1/traces with
// OpenTelemetry's own protobuf package, and keeps the spans.
package tracingtest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex as W3C trace context writes
// them.
type Span struct {
	Name                    string
	Kind                    tracepb.Span_SpanKind
	TraceID, SpanID, Parent string
	Attributes              map[string]string // string, int and bool values, as text
	StatusError             bool
	Service                 string // the resource's service.name
}

// Receiver is a running OTLP HTTP receiver.
type Receiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []Span
	posts int
}

// Start starts a receiver closed when tb ends, and points the OTLP
// exporter of the process at it (OTEL_EXPORTER_OTLP_ENDPOINT, with
// tb.Setenv: not for a parallel test).
func Start(tb testing.TB) *Receiver {
	r := New(tb)
	tb.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.srv.URL)
	return r
}

// New starts a receiver closed when tb ends, for another process to
// export to (OTEL_EXPORTER_OTLP_ENDPOINT=URL in its environment).
func New(tb testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL.
func (r *Receiver) URL() string { return r.srv.URL }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not OTLP traces over protobuf", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range ex.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Name: s.GetName(), Kind: s.GetKind(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Parent: hex.EncodeToString(s.GetParentSpanId()),
					Attributes: map[string]string{}, StatusError: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Service: service}
				for _, kv := range s.GetAttributes() {
					sp.Attributes[kv.GetKey()] = text(kv.GetValue())
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.posts++
	r.mu.Unlock()
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Posts is how many exports were received.
func (r *Receiver) Posts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts
}

// Find is the first received span named name, and whether there is one.
func (r *Receiver) Find(name string) (Span, bool) {
	for _, s := range r.Spans() {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.GetStringValue()
}
