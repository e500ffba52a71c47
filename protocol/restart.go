package protocol

// The answers of requests that a daemon restart interrupted
// (docs/transport.md §12.4, docs/operations.md). Both are -32603, like
// "Session closed by server", but they say the session goes on: only the
// request is gone.
var (
	// ErrRestartCancelled answers a request still running when an upgrade
	// handed its session to the new process (daemon.upgrade_grace ended).
	ErrRestartCancelled = &Error{Code: CodeInternalError, Message: "snodod restarted; this request was cancelled"}
	// ErrRestartLost answers, after a crash, a request the crashed
	// process had admitted and not answered.
	ErrRestartLost = &Error{Code: CodeInternalError, Message: "snodod restarted; this request was lost"}
)
