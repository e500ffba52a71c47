package session

import (
	"context"
	"log/slog"
	"sync"
)

// withSession returns log with the session's id on every record, as
// log.With("session", id) would. The handler that carries the id is made
// when the session first logs at an enabled level: Logger.With copies its
// handler at once, a few hundred bytes that an idle session, which never
// logs, would hold for nothing.
func withSession(log *slog.Logger, id uint64) *slog.Logger {
	return slog.New(&lazyHandler{base: log.Handler(), attr: slog.Uint64("session", id)})
}

// lazyHandler is base with attr, made on first use. Its methods may be
// called concurrently, as slog.Handler's may.
type lazyHandler struct {
	base slog.Handler
	attr slog.Attr
	once sync.Once
	with slog.Handler
}

func (l *lazyHandler) handler() slog.Handler {
	l.once.Do(func() { l.with = l.base.WithAttrs([]slog.Attr{l.attr}) })
	return l.with
}

func (l *lazyHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.base.Enabled(ctx, level)
}

func (l *lazyHandler) Handle(ctx context.Context, r slog.Record) error {
	return l.handler().Handle(ctx, r)
}

func (l *lazyHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return l.handler().WithAttrs(attrs)
}

func (l *lazyHandler) WithGroup(name string) slog.Handler {
	return l.handler().WithGroup(name)
}
