package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snodod/snodod/server"
)

// Limits of the demo tools' arguments.
const (
	// MaxSleepMs is the longest sleep: one hour (the executor's request
	// timeout usually ends it sooner).
	MaxSleepMs = 3_600_000
	// MaxBigBytes is the largest text big returns: 64 MiB.
	MaxBigBytes = 64 << 20
	// SleepProgressInterval is how often sleep reports progress.
	SleepProgressInterval = 100 * time.Millisecond
)

// Demo registers the demo tools on s. Their names and arguments are a
// public contract:
//
//   - echo {text: string} returns text as one text block.
//   - sleep {ms: integer} sleeps ms milliseconds and returns "done". It
//     ends early with its context's error when the request is cancelled,
//     and, when the request carries a progressToken, reports progress about
//     every 100 ms (progress = elapsed ms, total = ms).
//   - big {bytes: integer} returns one text block of exactly that many
//     bytes, at most MaxBigBytes.
//   - fail {} returns an isError result.
//   - panic {} panics in its handler (answered -32603 "Tool raised an
//     exception").
func Demo(s *server.Server) {
	server.AddTool(s, &server.Tool{
		Name:        "echo",
		Description: "Returns its text argument unchanged, as one text content block.",
	}, echo)
	server.AddTool(s, &server.Tool{
		Name:        "sleep",
		Description: "Sleeps for ms milliseconds, then returns \"done\". Honours cancellation and reports progress about every 100 ms when the request carries a progressToken.",
		InputSchema: boundedInteger("ms", "How long to sleep, in milliseconds.", MaxSleepMs),
	}, sleep)
	server.AddTool(s, &server.Tool{
		Name:        "big",
		Description: "Returns one text content block of exactly the requested number of bytes (at most 64 MiB), to exercise large frames.",
		InputSchema: boundedInteger("bytes", "The length of the text, in bytes.", MaxBigBytes),
	}, big)
	server.AddTool(s, &server.Tool{
		Name:        "fail",
		Description: "Always fails: returns a result with isError set.",
	}, func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
		return errorResult("fail: this demo tool always fails, on purpose"), nil, nil
	})
	server.AddTool(s, &server.Tool{
		Name:        "panic",
		Description: "Panics in its handler, to show that a crashing tool is answered with an error and the server goes on.",
	}, func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
		panic("the demo tool panic panics on purpose")
	})
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"The text to return."`
}

func echo(_ context.Context, _ *server.CallToolRequest, in echoArgs) (*server.CallToolResult, any, error) {
	return textResult(in.Text), nil, nil
}

type sleepArgs struct {
	Ms int64 `json:"ms"`
}

func sleep(ctx context.Context, _ *server.CallToolRequest, in sleepArgs) (*server.CallToolResult, any, error) {
	ms, err := within("ms", in.Ms, 0, MaxSleepMs)
	if err != nil {
		return nil, nil, fmt.Errorf("sleep: %w", err)
	}
	total := time.Duration(ms) * time.Millisecond
	start := time.Now()
	done := time.NewTimer(total)
	defer done.Stop()
	tick := time.NewTicker(SleepProgressInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-done.C:
			return textResult("done"), nil, nil
		case <-tick.C:
			elapsed := time.Since(start)
			if elapsed >= total {
				continue // done fires next; progress stays below total
			}
			// A refused report (busy, limit reached, no acknowledgement in
			// time) is no reason to stop sleeping. Without a progressToken
			// the report is accepted and discarded.
			_ = server.ReportProgress(ctx, server.Progress{
				Progress: float64(elapsed.Milliseconds()),
				Total:    float64(ms),
				HasTotal: true,
			})
		}
	}
}

type bigArgs struct {
	Bytes int64 `json:"bytes"`
}

func big(_ context.Context, _ *server.CallToolRequest, in bigArgs) (*server.CallToolResult, any, error) {
	n, err := within("bytes", in.Bytes, 0, MaxBigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("big: %w", err)
	}
	return textResult(strings.Repeat("x", int(n))), nil, nil
}

// boundedInteger is the input schema of a tool whose one required argument
// name is an integer in [0, max].
func boundedInteger(name, description string, max int) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"` + name + `":{"type":"integer","minimum":0,"maximum":` +
		strconv.Itoa(max) + `,"description":` + strconv.Quote(description) + `}},"required":["` + name + `"]}`)
}

// within returns n when it lies in [lo, hi]. The input schema already says
// so; the check keeps the handler safe whatever validated its arguments.
func within(name string, n, lo, hi int64) (int64, error) {
	switch {
	case n < lo:
		return 0, fmt.Errorf("argument %s must be at least %d", name, lo)
	case n > hi:
		return 0, fmt.Errorf("argument %s must be at most %d", name, hi)
	}
	return n, nil
}

// textResult is a successful result holding one text block.
func textResult(text string) *server.CallToolResult {
	return &server.CallToolResult{Content: []server.Content{server.TextContent(text)}}
}

// errorResult is an isError result holding one text block.
func errorResult(text string) *server.CallToolResult {
	return &server.CallToolResult{Content: []server.Content{server.TextContent(text)}, IsError: true}
}
