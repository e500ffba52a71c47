package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// notifier reports the daemon's state to systemd (sd_notify(3)) when the
// service manager asked for it by setting NOTIFY_SOCKET; otherwise every
// call is a no-op, so callers never check.
type notifier struct {
	enabled bool
	log     *slog.Logger
	failed  sync.Once
	// held drops every message: systemd takes them from the main process
	// only (NotifyAccess=main), and a process an upgrade started is not
	// the main one until the old daemon says so (adopt.go).
	held atomic.Bool
}

func newNotifier(log *slog.Logger) *notifier {
	return &notifier{enabled: os.Getenv("NOTIFY_SOCKET") != "", log: log}
}

// send sends one datagram holding the given assignments, one per line.
// NOTIFY_SOCKET stays set: systemd accepts messages from the main pid only
// (NotifyAccess=main), so a child that inherits it can do no harm.
func (n *notifier) send(states ...string) {
	if !n.enabled || n.held.Load() {
		return
	}
	if _, err := sd.SdNotify(false, strings.Join(states, "\n")); err != nil {
		n.failed.Do(func() { n.log.Warn("sd_notify failed; systemd will not see the daemon's state", "error", err) })
	}
}

// reloading is RELOADING=1 with the MONOTONIC_USEC that Type=notify-reload
// (systemd 253 and later) requires to match the reload to its READY=1.
func reloading() string {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return "RELOADING=1"
	}
	return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/1000)
}

// watchdogInterval returns how often to send WATCHDOG=1: half of
// WATCHDOG_USEC, as sd_watchdog_enabled(3) advises, or 0 when systemd runs
// no watchdog for this process.
func watchdogInterval(log *slog.Logger) time.Duration {
	d, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("ignoring the systemd watchdog setting", "error", err)
		return 0
	}
	return d / 2
}
