package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// adoptReportEnv names the file adoptingSuccessor writes what it got to.
const adoptReportEnv = "SNODOD_DAEMON_TEST_ADOPT_REPORT"

// adoptReport is what adoptingSuccessor got: each server's record, and the
// server's answer to a call it wrote on the stdin it was handed.
type adoptReport struct {
	Servers []upgradeMsg `json:"servers"`
	Answers []string     `json:"answers"`
}

// adoptingSuccessor speaks the new process's side of the upgrade wire
// (successorEnv = "adopt"): ready, saying it adopts servers; every
// session read and dropped; adopted; then each hosted server handed over
// is asked for its history over its own pipes, and the answers written to
// the report once the old daemon says main.
func adoptingSuccessor() int {
	fd, err := strconv.Atoi(os.Getenv(UpgradeEnv))
	if err != nil {
		return 2
	}
	w, err := newWire(os.NewFile(uintptr(fd), "upgrade"))
	if err != nil {
		return 2
	}
	defer w.close()
	var rep adoptReport
	for {
		m, files, err := w.recv(time.Now().Add(time.Minute))
		if err != nil {
			return 2
		}
		switch m.Type {
		case "hello":
			_ = w.send(upgradeMsg{Type: "ready", PID: os.Getpid(), Servers: true})
		case "done":
			_ = w.send(upgradeMsg{Type: "adopted"})
		case "upstream":
			rep.Servers = append(rep.Servers, m)
			answer := "no descriptors"
			if len(files) == 3 && m.Upstream != nil {
				id := m.Upstream.Conn.NextID + 1
				fmt.Fprintf(files[0], `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"history","arguments":{}}}`+"\n", id)
				line, err := bufio.NewReader(files[1]).ReadString('\n')
				answer = line
				if err != nil {
					answer = "read: " + err.Error()
				}
			}
			rep.Answers = append(rep.Answers, answer)
		case "main":
			b, _ := json.Marshal(rep)
			if os.WriteFile(os.Getenv(adoptReportEnv), b, 0o600) != nil {
				return 2
			}
			closeFiles(files)
			return 0 // the servers' pipes close with it: they exit
		}
		closeFiles(files)
	}
}

// An upgrade hands the idle hosted server over instead of stopping it:
// the new process gets its record (the same pid, the handshake's results,
// the last request id) and its pipes, on which the server, never
// signalled, answers, with a history of one initialize and the call made
// before the upgrade.
func TestUpgradeHandsServersOver(t *testing.T) {
	t.Setenv(successorEnv, "adopt")
	report := filepath.Join(t.TempDir(), "report.json")
	t.Setenv(adoptReportEnv, report)
	proctest.Cleanup(t)
	dir := shortDir(t)
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`
[daemon]
socket = %q
shutdown_grace = "2s"

[mcpServers.fake]
command = %q
start = "eager"
`, filepath.Join(dir, "s.sock"), fakebuild.Build(t))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, cfg, Options{StateDir: filepath.Join(dir, "state"), Executable: os.Args[0], UpgradeArgs: []string{"-test.run=^$"}})
	sock := r.cfg.Daemon.ControlSocket
	pid := upstreamRow(t, sock, "ready").PID
	s := dialSession(t, r.cfg.Daemon.Socket)
	s.initialize()
	if got := s.call(2, "fake__echo", `{"before":"the upgrade"}`); !strings.Contains(got, "the upgrade") {
		t.Fatalf("a call before the upgrade: %s", got)
	}

	next, err := (&control.Client{Socket: sock}).Upgrade(t.Context(), "")
	if err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if err := r.wait(t); err != nil {
		t.Fatalf("Run after the upgrade: %v", err)
	}
	var rep adoptReport
	eventually.True(t, "the successor's report", func() bool {
		b, err := os.ReadFile(report)
		return err == nil && json.Unmarshal(b, &rep) == nil
	})
	if len(rep.Servers) != 1 || rep.Servers[0].Upstream == nil {
		t.Fatalf("the successor got servers %+v, want the fake", rep.Servers)
	}
	k := rep.Servers[0].Upstream
	if k.Name != "fake" || k.Conn.PID != pid || k.Conn.Era == "" || k.Conn.NextID == 0 || k.Restarts != 0 {
		t.Errorf("the record handed over: %+v; want fake, pid %d, its handshake and ids", k, pid)
	}
	answer := rep.Answers[0]
	if inits, echoes := strings.Count(answer, `"method":"initialize"`), strings.Count(answer, `"tool":"echo"`); inits != 1 || echoes != 1 {
		t.Errorf("the server handed over answered %q; want a history of 1 initialize and 1 echo", answer)
	}
	// It ends with its pipes: the successor exited, and the old daemon
	// (this test) never signalled it.
	eventually.True(t, "the successor's exit", func() bool { return syscall.Kill(next, 0) != nil || !proctest.Alive(next) })
	eventually.True(t, "the server's exit at the end of its stdin", func() bool { return !proctest.Alive(pid) })
}
