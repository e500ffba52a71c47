package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// TestConnectRaceStartsOneDaemon: several MCP clients start `snodod
// connect` at once and no daemon runs (docs/architecture.md §10): each
// connect may start one, the session socket's lock
// lets one of them run, and every client is served by that one.
func TestConnectRaceStartsOneDaemon(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	env := isolatedEnv(dir)
	sock := filepath.Join(dir, "run", "snodod", "control.sock")
	t.Cleanup(func() { stopStarted(t, dir, sock) })

	const clients = 4
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"racer","version":"1"}}}` + "\n"
	var wg sync.WaitGroup
	outs := make([]string, clients)
	errs := make([]string, clients)
	codes := make([]int, clients)
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			cmd := exec.Command(binary, "connect")
			cmd.Env = env
			cmd.Stdin = strings.NewReader(init)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			<-start
			_ = cmd.Run()
			outs[i], errs[i], codes[i] = stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
		})
	}
	close(start)
	wg.Wait()
	for i := range clients {
		if codes[i] != 0 || !strings.HasPrefix(outs[i], `{"jsonrpc":"2.0","id":1,"result":{`) {
			t.Errorf("connect %d: %d\n%s%s", i, codes[i], outs[i], errs[i])
		}
	}
	// One daemon serves, and no other is left.
	if !eventually.Within(answerWithin, func() bool { return len(startedDaemons(dir)) == 1 }) {
		t.Errorf("daemons running for %s: %v, want one", dir, startedDaemons(dir))
	}
	log, _ := os.ReadFile(filepath.Join(dir, "state", "snodod", "daemon.log"))
	if n := strings.Count(string(log), `msg="snodod started"`); n != 1 {
		t.Errorf("%d daemons logged that they started, want 1:\n%s", n, log)
	}
	if strings.Contains(string(log), "DATA RACE") {
		t.Errorf("the race detector reported a race:\n%s", log)
	}
	t.Logf("%d connects started a daemon", strings.Count(string(log), "starts the daemon: "))
}

// startedDaemons lists the pids of `snodod serve` processes started for
// the environment of dir (their XDG_RUNTIME_DIR).
func startedDaemons(dir string) []int {
	want := []byte("XDG_RUNTIME_DIR=" + filepath.Join(dir, "run") + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !proctest.Alive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if bytes.HasPrefix(cmdline, []byte(binary+"\x00serve")) && bytes.Contains(environ, want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopStarted ends the daemons started for dir: the one that answers on
// sock first, with SIGTERM, as a user would; then any other.
func stopStarted(t *testing.T, dir, sock string) {
	if st, err := (&control.Client{Socket: sock}).Status(t.Context()); err == nil {
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		if !waitGone(st.PID, 30*time.Second) {
			t.Errorf("the started daemon (pid %d) did not stop after SIGTERM", st.PID)
		}
	}
	for _, pid := range startedDaemons(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, answerWithin)
	}
}
