package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// stopOnSignal returns a context that the first SIGINT or SIGTERM cancels:
// the command then ends gracefully (serve drains, stdio finishes its
// requests). A second signal ends the process at once, after cleanup, with
// exit status 1 and a line in the log: a person pressing Ctrl-C twice, or a
// supervisor that lost patience, gets an exit status rather than a death
// by signal. stop releases the signals.
func stopOnSignal(log *slog.Logger, cleanup func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			log.Info("signal: ending gracefully; a second signal exits at once", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			log.Warn("second signal: exiting now, without waiting for the requests still running", "signal", s.String())
			if cleanup != nil {
				cleanup()
			}
			os.Exit(exitFailure)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
