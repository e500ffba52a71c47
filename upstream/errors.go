package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
)

// The codes of snodod's own upstream errors (docs/upstreams.md §7). They lie
// outside JSON-RPC's reserved range, as the 2026 rules ask, and every
// message starts with "snodod:", so none can be mistaken for the
// upstream's own error.
const (
	// CodeUnavailable: the upstream is not running, or stopped during the
	// request, or did not answer within request_timeout.
	CodeUnavailable = -31001
	// CodeLimit: max_instances or upstreams.max_children is reached.
	CodeLimit = -31002
	// CodeOverloaded: the instance's queue (upstreams.max_queued) or the
	// parked calls (upstreams.max_parked) are full.
	CodeOverloaded = -31003
	// CodeTooLong: the upstream's answer exceeded the line limit.
	CodeTooLong = -31004
)

// MetaKey is the _meta member of an isError result that carries Detail.
const MetaKey = "dev.snodod/upstream"

// maxStderrTail bounds Detail.StderrTail.
const maxStderrTail = 2 << 10

// Detail is the data of a -3100x error and the _meta[MetaKey] of an
// isError result: the upstream's state when the request failed.
type Detail struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Instance string `json:"instance"`
	Attempts int    `json:"attempts"`
	// RetryInMs is when the next attempt to start is due, null when none
	// is scheduled.
	RetryInMs  *int64 `json:"retryInMs"`
	LastExit   string `json:"lastExit"`
	StderrTail string `json:"stderrTail"`
}

// failure is how a relayed request failed, before it is shaped for its
// method: an isError result for tools/call (unless asError), an error for
// every other method.
type failure struct {
	code    int64
	message string
	detail  Detail
	// asError keeps a tools/call failure a JSON-RPC error (limits, docs/upstreams.md §7).
	asError bool
	// login: the remote server needs a person to log in (a client that
	// can open a URL is asked to, loginelicit.go).
	login bool
}

func (f *failure) Error() string { return f.message }

// rpcError is the failure as a JSON-RPC error, data the Detail.
func (f *failure) rpcError() *protocol.Error {
	return &protocol.Error{Code: f.code, Message: f.message, Data: f.detail}
}

// toolResult is the failure as an isError tools/call result.
func (f *failure) toolResult() json.RawMessage {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	b, _ := protocol.AppendValue(nil, struct {
		Content []text            `json:"content"`
		IsError bool              `json:"isError"`
		Meta    map[string]Detail `json:"_meta"`
	}{[]text{{"text", f.message}}, true, map[string]Detail{MetaKey: f.detail}})
	return b
}

// unavailableMessage words an instance that cannot serve (docs/upstreams.md §7):
// why, how often, when the next attempt is, and the last stderr.
func unavailableMessage(name string, s *stateSnapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "snodod: upstream %q is unavailable: ", name)
	switch s.state {
	case StateStopped:
		if s.manual {
			fmt.Fprintf(&b, "it is stopped (start = \"manual\", or stopped with snodod upstream stop); run snodod upstream start %s", name)
		} else {
			b.WriteString("it is stopped")
		}
	case StateDisabled:
		fmt.Fprintf(&b, "it is disabled in the configuration; enable it (disabled = false) and reload")
	case StateDraining:
		b.WriteString("it is being replaced after a reload; try again")
	default:
		cause := s.cause
		if cause == "" {
			cause = "it did not start"
		}
		b.WriteString(cause)
		if s.failures > 1 {
			fmt.Fprintf(&b, " (%d times in %s)", s.failures, seconds(s.failureSpan))
		}
		switch {
		case s.state == StateFailed && s.retryIn > 0:
			fmt.Fprintf(&b, "; it failed %d starts in a row: no automatic restart, the next request may try again in %s (or run snodod upstream restart %s)", s.failures, seconds(s.retryIn), name)
		case s.state == StateFailed:
			fmt.Fprintf(&b, "; it failed %d starts in a row: no automatic restart (run snodod upstream restart %s)", s.failures, name)
		case s.retryIn > 0:
			fmt.Fprintf(&b, "; next attempt in %s", seconds(s.retryIn))
		}
	}
	b.WriteString(".")
	if tail := strings.TrimSpace(s.stderrTail); tail != "" {
		b.WriteString(" Last stderr: ")
		b.WriteString(tail)
	}
	return b.String()
}

// seconds words a duration as the messages do: "8 s", "40 s", "250 ms".
func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", max(d.Milliseconds(), 1))
	}
	return fmt.Sprintf("%d s", int64((d+time.Second/2)/time.Second))
}

// shortDuration is a configured duration as written: "10m", "90s".
func shortDuration(d time.Duration) string { return config.FormatDuration(d) }

// exitWords says how an instance ended, for "exited (…) while this call
// was running": "signal 9" or "status 1".
func exitWords(e *mcpclient.ExitError) string {
	switch {
	case e == nil:
		return "its output ended"
	case e.Signal != 0:
		return fmt.Sprintf("signal %d", int(e.Signal))
	case e.Code >= 0:
		return fmt.Sprintf("status %d", e.Code)
	}
	return strings.TrimPrefix(e.Error(), "exited ")
}
