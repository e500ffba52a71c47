package daemon

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/config"
)

// notifySocket stands in for systemd: a unixgram socket at NOTIFY_SOCKET.
type notifySocket struct {
	t *testing.T
	c *net.UnixConn
}

func newNotifySocket(t *testing.T) *notifySocket {
	path := filepath.Join(shortDir(t), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return &notifySocket{t: t, c: c}
}

// next returns the next datagram's lines.
func (n *notifySocket) next() []string {
	n.t.Helper()
	buf := make([]byte, 4096)
	_ = n.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	k, err := n.c.Read(buf)
	if err != nil {
		n.t.Fatalf("no notification: %v", err)
	}
	return strings.Split(string(buf[:k]), "\n")
}

// expect reads datagrams until one holds line, and returns that one.
func (n *notifySocket) expect(line string) []string {
	n.t.Helper()
	for {
		msg := n.next()
		for _, l := range msg {
			if l == line {
				return msg
			}
		}
		n.t.Logf("notification %q", msg)
	}
}

func TestNotify(t *testing.T) {
	n := newNotifySocket(t)
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.max_sessions": 8}), Options{
		Reload: func() (*config.Config, error) { return loadConfig(dir, map[string]any{"daemon.max_sessions": 9}) },
	})
	if got := n.next(); len(got) != 2 || got[0] != "READY=1" || got[1] != "STATUS=0 sessions (max 8)" {
		t.Errorf("first notification %q, want READY=1 and the status", got)
	}
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	n.expect("STATUS=1 sessions (max 8)")

	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	msg := n.expect("RELOADING=1")
	if len(msg) != 2 || !strings.HasPrefix(msg[1], "MONOTONIC_USEC=") {
		t.Errorf("reloading %q, want MONOTONIC_USEC too", msg)
	}
	n.expect("READY=1")

	r.stop()
	n.expect("STOPPING=1")
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
}

func TestWatchdog(t *testing.T) {
	n := newNotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "100000") // pings every 50 ms
	t.Setenv("WATCHDOG_PID", "")
	dir := shortDir(t)
	startDaemon(t, testConfig(t, dir, nil), Options{})
	n.expect("READY=1")
	n.expect("WATCHDOG=1")
	n.expect("WATCHDOG=1")
}

// TestNotifyOff: without NOTIFY_SOCKET nothing is sent and nothing fails.
func TestNotifyOff(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := newNotifier(testLogger())
	if n.enabled {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	n.send("READY=1")
}
