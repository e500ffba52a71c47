// Package ctxkey holds the context keys that package server and package
// server/executor share: the sinks a transport gives a request (which
// executor.RequestContext answers and server's ReportProgress, Log and
// RequestClient read), and the executor's record of a timeout (which the
// runtime's Observer reports).
package ctxkey

// Notifier is the key of a request's server.Notifier.
type Notifier struct{}

// Requester is the key of a request's server.ClientRequester.
type Requester struct{}

// Progress is the key of a request's server.ProgressReporter.
type Progress struct{}

// TimedOut is the key of a *atomic.Bool the executor sets before it
// cancels a handler's context at its deadline, so that the runtime tells
// a timeout from a cancellation.
type TimedOut struct{}
