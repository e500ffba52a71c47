package e2e_test

import (
	"bufio"
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
)

// The fault suite's output floods (docs/transport.md §11.5): clients that ask for
// large answers and never read them, beside a client that reads.

var plainBuild struct {
	once sync.Once
	path string
	err  error
}

// plainBinary is snodod built without the race detector, whose shadow
// memory would hide what the daemon itself holds: for the tests that
// measure the daemon's memory. Built once, beside the race binary.
func plainBinary(t *testing.T) string {
	t.Helper()
	plainBuild.once.Do(func() {
		plainBuild.path = filepath.Join(filepath.Dir(binary), "snodod-plain")
		out, err := exec.Command("go", "build", "-o", plainBuild.path, "github.com/snodod/snodod/cmd/snodod").CombinedOutput()
		if err != nil {
			plainBuild.err = fmt.Errorf("build snodod without -race: %v\n%s", err, out)
		}
	})
	if plainBuild.err != nil {
		t.Fatal(plainBuild.err)
	}
	return plainBuild.path
}

// memoryKB reads a field of /proc/PID/status in kB: VmRSS (resident now)
// or VmHWM (the most it was).
func memoryKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// dialSmall dials the session socket with small socket buffers, as a
// client that set a small receive buffer.
func dialSmall(t *testing.T, path string) *sessionConn {
	t.Helper()
	s := mustDial(t, path)
	raw, err := s.c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
	})
	return s
}

func readLine(id int, uri string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q}}`, id, uri)
}

// TestOutputFlood: two clients pipeline 36 reads of an 8 MB file each and
// never read, a third calls the demo big tool 32 times for 4 MB and never
// reads; a client beside them reads the same file and calls echo and big
// meanwhile, and gets every answer, whole. The daemon's pending output
// stays within daemon.max_buffered_bytes, its peak memory is a fraction of
// what the answers asked for would take (about 1.4 GB), the clients that do
// not read lose their sessions at the write timeout, and the daemon's
// memory returns to near where it started.
func TestOutputFlood(t *testing.T) {
	defer func(race string) { binary = race }(binary)
	binary = plainBinary(t)
	files, err := os.MkdirTemp("", "flood")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(files) })
	const fileBytes = 8_000_000
	file := filepath.Join(files, "big.txt")
	if err := os.WriteFile(file, bytes.Repeat([]byte("a"), fileBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	uri := "file://" + file
	d := startDaemon(t, fmt.Sprintf("[session]\nwrite_timeout = \"3s\"\n[executor]\nmax_concurrency = 4\n[resources.big]\npath = %q\n", file), nil)
	pid := d.cmd.Process.Pid
	healthy := mustDial(t, d.socket)
	if err := healthy.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	// Warm up: the healthy client's reads, so that the baseline holds what
	// a daemon serving them holds anyway.
	readWhole := func(id int) error {
		if err := healthy.send(readLine(id, uri)); err != nil {
			return err
		}
		r, err := healthy.answer(strconv.Itoa(id), 30*time.Second)
		switch {
		case err != nil:
			return err
		case r.Error != nil || len(r.Result) < fileBytes:
			return fmt.Errorf("read %d: %d bytes, error %+v", id, len(r.Result), r.Error)
		}
		return nil
	}
	if err := readWhole(1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the daemon settles
	base := memoryKB(t, pid, "VmRSS")

	var floods []*sessionConn
	for range 2 {
		s := dialSmall(t, d.socket)
		if err := s.initialize("2025-06-18"); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for id := range 36 {
			lines = append(lines, readLine(10+id, uri))
		}
		if err := s.send(lines...); err != nil {
			t.Fatal(err)
		}
		floods = append(floods, s)
	}
	bigs := dialSmall(t, d.socket)
	if err := bigs.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for id := range 32 {
		lines = append(lines, callLine(10+id, "big", `{"bytes":4000000}`))
	}
	if err := bigs.send(lines...); err != nil {
		t.Fatal(err)
	}

	// Beside the flood: every answer, whole; and the pending output the
	// daemon holds stays within its budget.
	var most int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if st, err := d.status(t.Context()); err == nil {
				most = max(most, st.BufferedBytes)
			}
		}
	}()
	for i := range 5 {
		if err := healthy.echo(100+i, "beside the flood"); err != nil {
			t.Fatal(err)
		}
		if err := readWhole(200 + i); err != nil {
			t.Fatal(err)
		}
		if err := healthy.send(callLine(300+i, "big", `{"bytes":1000000}`)); err != nil {
			t.Fatal(err)
		}
		r, err := healthy.answer(strconv.Itoa(300+i), 30*time.Second)
		if text, terr := toolText(r); err != nil || terr != nil || len(text) != 1_000_000 {
			t.Fatalf("big beside the flood: %d bytes, %v %v", len(text), err, terr)
		}
	}
	d.awaitStatus(t, "the clients that do not read lose their sessions", time.Minute, func(st *control.Status) bool { return len(st.Sessions) == 1 })
	close(stopSampling)
	<-sampled
	peak := memoryKB(t, pid, "VmHWM")
	t.Logf("daemon memory: %d MB at the start, %d MB at most; the daemon's buffers held %d MB at most", base>>10, peak>>10, most>>20)
	if most > 64_000_000+4*64<<10 {
		t.Errorf("the sessions held %d bytes of lines and output, past daemon.max_buffered_bytes (64,000,000) and their own 64 KiB", most)
	}
	if peak-base > 500<<10 {
		t.Errorf("the daemon grew by %d MB during the flood: its pending output is not bounded", (peak-base)>>10)
	}
	for _, s := range append(floods, bigs) {
		if err := s.drainToEOF(30 * time.Second); err != nil {
			t.Errorf("a client that did not read: %v, want its connection ended", err)
		}
	}
	var now int64
	if !eventually.Within(30*time.Second, func() bool { now = memoryKB(t, pid, "VmRSS"); return now-base < 100<<10 }) {
		t.Errorf("the daemon holds %d MB after the flood, %d MB more than before it", now>>10, (now-base)>>10)
	}
	if err := healthy.echo(400, "after the flood"); err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon memory after the flood: %d MB", now>>10)
	d.stop(t)
}
