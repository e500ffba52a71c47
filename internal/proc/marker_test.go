package proc

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A process in execve reads an empty or cut-short environment for a
// moment; its marker must still be found then, or a group's escapee that
// execs just as its leader exits is never killed (docs/architecture.md §6). Each
// run reads the marker of a shell right after it printed its pid, while it
// execs sleep; the runs are many so that some meet the exec.
func TestMarkedDuringExec(t *testing.T) {
	for i := range 100 {
		cmd := exec.Command("sh", "-c", "echo $$; exec sleep 1000")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = w
		g, err := Start(cmd)
		_ = w.Close()
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(r).ReadString('\n')
		pid, perr := strconv.Atoi(strings.TrimSpace(line))
		found := err == nil && perr == nil && marked(pid, g.Marker(), false)
		_ = g.Stop(0)
		_ = r.Close()
		if err != nil || perr != nil {
			t.Fatalf("run %d: read the pid: %q, %v, %v", i, line, err, perr)
		}
		if !found {
			t.Fatalf("run %d: the marker of %d, which is execing, was not found", i, pid)
		}
	}
}
