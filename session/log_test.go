package session

import (
	"bytes"
	"log/slog"
	"testing"
)

// withSession logs what log.With("session", id) logs, attributes and groups
// in the same places.
func TestWithSessionLogsAsWith(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"message", func(l *slog.Logger) { l.Info("hello", "k", 1) }},
		{"attrs", func(l *slog.Logger) { l.With("a", "b").Warn("hello") }},
		{"group", func(l *slog.Logger) { l.WithGroup("g").Error("hello", "k", 2) }},
		{"disabled", func(l *slog.Logger) { l.Debug("hidden") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}
			tc.log(slog.New(slog.NewTextHandler(&want, opts)).With("session", uint64(7)))
			tc.log(withSession(slog.New(slog.NewTextHandler(&got, opts)), 7))
			if got.String() != want.String() {
				t.Fatalf("got %q, want %q", got.String(), want.String())
			}
		})
	}
}
