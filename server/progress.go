package server

import (
	"context"
	"errors"

	"github.com/snodod/snodod/server/internal/ctxkey"
)

// Progress is one progress report of a handler (docs/transport.md §10).
type Progress struct {
	Progress float64
	// Total is written only when HasTotal is set.
	Total    float64
	HasTotal bool
	// Message is written only when non-empty.
	Message string
}

// Reasons a progress report was not written. A rejected report writes
// nothing; the handler may go on.
var (
	ErrProgressInvalid       = errors.New("progress: invalid report")
	ErrProgressNotIncreasing = errors.New("progress: not increasing")
	ErrProgressLimit         = errors.New("progress: limit reached")
	ErrProgressBusy          = errors.New("progress: another report is outstanding")
	ErrProgressClosed        = errors.New("progress: request closed")
	ErrProgressTimeout       = errors.New("progress: no acknowledgement in time")
)

// ProgressReporter delivers a request's progress reports. A transport puts
// one in the handler's context when the request carries a progressToken.
type ProgressReporter interface {
	// Report blocks until the notification is written or refused. It may be
	// called from any goroutine; a second call while one is outstanding gets
	// ErrProgressBusy.
	Report(p Progress) error
}

type progressKey = ctxkey.Progress

// WithProgress returns a context whose handler reports progress to r.
func WithProgress(ctx context.Context, r ProgressReporter) context.Context {
	return context.WithValue(ctx, progressKey{}, r)
}

// ReportProgress reports progress for the request ctx belongs to. Without a
// progressToken on the request there is no reporter, and the report is
// accepted and discarded (it returns nil).
func ReportProgress(ctx context.Context, p Progress) error {
	r, _ := ctx.Value(progressKey{}).(ProgressReporter)
	if r == nil {
		return nil
	}
	return r.Report(p)
}

// Notifier writes a request-scoped notification (a log message) before the
// request's final line, under the rules of progress reports: it blocks until
// written or refused, and nothing is written after the request finished or
// was cancelled (docs/transport.md §10.3). A transport puts one in every
// handler's context.
type Notifier interface {
	Notify(method string, params any) error
}

type notifierKey = ctxkey.Notifier

// WithNotifier returns a context whose handler sends request-scoped
// notifications through n.
func WithNotifier(ctx context.Context, n Notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}
