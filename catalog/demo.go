package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
	s.AddTool(server.Tool{
		Name:        "echo",
		Description: "Returns its text argument unchanged, as one text content block.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The text to return."}},"required":["text"]}`),
		Handler:     echo,
	})
	s.AddTool(server.Tool{
		Name:        "sleep",
		Description: "Sleeps for ms milliseconds, then returns \"done\". Honours cancellation and reports progress about every 100 ms when the request carries a progressToken.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":` + strconv.Itoa(MaxSleepMs) + `,"description":"How long to sleep, in milliseconds."}},"required":["ms"]}`),
		Handler:     sleep,
	})
	s.AddTool(server.Tool{
		Name:        "big",
		Description: "Returns one text content block of exactly the requested number of bytes (at most 64 MiB), to exercise large frames.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0,"maximum":` + strconv.Itoa(MaxBigBytes) + `,"description":"The length of the text, in bytes."}},"required":["bytes"]}`),
		Handler:     big,
	})
	s.AddTool(server.Tool{
		Name:        "fail",
		Description: "Always fails: returns a result with isError set.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
			return server.ErrorResult("fail: this demo tool always fails, on purpose"), nil
		},
	})
	s.AddTool(server.Tool{
		Name:        "panic",
		Description: "Panics in its handler, to show that a crashing tool is answered with an error and the server goes on.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
		Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
			panic("the demo tool panic panics on purpose")
		},
	})
}

func echo(_ context.Context, raw json.RawMessage) (*server.ToolResult, error) {
	text, err := stringArg(raw, "text")
	if err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	return server.TextResult(text), nil
}

func sleep(ctx context.Context, raw json.RawMessage) (*server.ToolResult, error) {
	ms, err := intArg(raw, "ms", 0, MaxSleepMs)
	if err != nil {
		return nil, fmt.Errorf("sleep: %w", err)
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
			return nil, ctx.Err()
		case <-done.C:
			return server.TextResult("done"), nil
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

func big(_ context.Context, raw json.RawMessage) (*server.ToolResult, error) {
	n, err := intArg(raw, "bytes", 0, MaxBigBytes)
	if err != nil {
		return nil, fmt.Errorf("big: %w", err)
	}
	return server.TextResult(strings.Repeat("x", int(n))), nil
}

// stringArg reads the required string argument name.
func stringArg(raw json.RawMessage, name string) (string, error) {
	v, err := arg(raw, name)
	if err != nil {
		return "", err
	}
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", fmt.Errorf("argument %s must be a string", name)
	}
	return s, nil
}

// intArg reads the required integer argument name, which must lie in
// [lo, hi]. As in JSON Schema, integral numbers written with a fraction or
// an exponent (5.0, 1e3) are integers.
func intArg(raw json.RawMessage, name string, lo, hi int64) (int64, error) {
	v, err := arg(raw, name)
	if err != nil {
		return 0, err
	}
	// ParseInt saturates out-of-range literals, which then fail the bounds.
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		f, err := strconv.ParseFloat(string(v), 64) // ±Inf when out of range
		if err != nil && !errors.Is(err, strconv.ErrRange) || f != math.Trunc(f) {
			return 0, fmt.Errorf("argument %s must be an integer", name)
		}
		n = saturate(f)
	}
	if n < lo {
		return 0, fmt.Errorf("argument %s must be at least %d", name, lo)
	}
	if n > hi {
		return 0, fmt.Errorf("argument %s must be at most %d", name, hi)
	}
	return n, nil
}

// saturate converts an integral f to int64, clamping it to the int64 range.
func saturate(f float64) int64 {
	switch {
	case f >= 1<<63:
		return math.MaxInt64
	case f < -(1 << 63):
		return math.MinInt64
	}
	return int64(f)
}

// arg returns the raw value of the argument name. The server has already
// checked that raw is an object holding every required argument.
func arg(raw json.RawMessage, name string) (json.RawMessage, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, errors.New("arguments must be a JSON object")
	}
	v, ok := args[name]
	if !ok {
		return nil, fmt.Errorf("missing required argument %s", name)
	}
	return v, nil
}
