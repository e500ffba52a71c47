package daemon

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/config"
)

// A Config built by hand leaves its limits zero, and zero means the
// default there too: the daemon admits sessions (it admitted none when a
// zero MaxSessions meant zero sessions) and reports the default limits.
func TestHandBuiltConfig(t *testing.T) {
	dir := shortDir(t)
	cfg := &config.Config{Daemon: config.Daemon{Socket: filepath.Join(dir, "s.sock")}}
	r := startDaemon(t, cfg, Options{})
	c := dialSession(t, cfg.Daemon.Socket)
	c.initialize()
	if got := c.call(2, "echo", `{"text":"hi"}`); !strings.Contains(got, `"text":"hi"`) {
		t.Fatalf("echo: %s", got)
	}
	st := r.d.Status()
	if st.MaxSessions != 1024 || st.Executor.MaxQueue != 256 || st.Executor.MaxConcurrency != 32 || st.Executor.RequestTimeout != "30s" {
		t.Errorf("status limits: %+v", st)
	}
}

func TestNewNeedsASocket(t *testing.T) {
	_, err := New(&config.Config{}, Options{Logger: testLogger()})
	if err == nil || !strings.Contains(err.Error(), "set Daemon.Socket") {
		t.Fatalf("New without a socket: %v", err)
	}
}
