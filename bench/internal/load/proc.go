package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is one server under test: a name for the table and the command
// that serves MCP on its standard input and output.
type Server struct {
	Name    string
	Command []string
	Dir     string   // working directory; "" for the harness's own
	Env     []string // added to the harness's environment
	// Serve, when set, is a snodod binary: each process of the server is
	// then a fresh `Serve serve --demo` daemon, ready before the clock
	// starts, and Command (with the daemon's control socket appended)
	// is the client that hands its pipes to it, `snodod connect
	// --control-socket`. What a process is measured by (CPU, memory) is
	// the daemon's: the session's requests are served there.
	Serve string
}

// Proc is a running server process and its connection.
type Proc struct {
	*Conn
	cmd     *exec.Cmd
	stdin   *os.File // our end of the server's standard input
	stdout  *os.File // our end of the server's standard output
	started time.Time
	stderr  *tail

	waited chan struct{}
	state  *os.ProcessState
	err    error
	daemon *Daemon // Server.Serve's, stopped with the process
}

// Spawn starts s with pipes on its standard input and output. Its standard
// error is kept (the last 4 KiB) for reports.
func Spawn(s Server) (*Proc, error) {
	var dm *Daemon
	args := s.Command[1:]
	if s.Serve != "" {
		var err error
		if dm, err = StartDaemon(s.Serve, 16, nil); err != nil {
			return nil, err
		}
		args = append(slices.Clip(args), dm.Control())
	}
	p, err := spawn(s, args)
	if err != nil {
		if dm != nil {
			dm.Stop()
		}
		return nil, err
	}
	p.daemon = dm
	return p, nil
}

func spawn(s Server, args []string) (*Proc, error) {
	cmd := exec.Command(s.Command[0], args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p := &Proc{cmd: cmd, stdin: inW, stdout: outR, stderr: &tail{max: 4 << 10}, waited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.stderr
	p.started = time.Now()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p.Conn = NewConn(outR, inW, 4096)
	go func() {
		p.err = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.waited)
	}()
	return p, nil
}

// Started is when the process was started.
func (p *Proc) Started() time.Time { return p.started }

// PID is the server's process id: the daemon's for a Server.Serve.
func (p *Proc) PID() int {
	if p.daemon != nil {
		return p.daemon.PID()
	}
	return p.cmd.Process.Pid
}

// Stderr is the end of what the server wrote on standard error (and of
// its daemon's log, for a Server.Serve).
func (p *Proc) Stderr() string {
	if p.daemon != nil {
		return p.stderr.String() + p.daemon.Stderr()
	}
	return p.stderr.String()
}

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, string) {
	select {
	case <-p.waited:
		return true, p.state.String()
	default:
		return false, ""
	}
}

// Close ends the server's input and waits up to grace for it to exit, then
// kills it. It returns the process state (with its rusage) and whether it
// had to be killed.
func (p *Proc) Close(grace time.Duration) (state *os.ProcessState, killed bool) {
	p.stdin.Close()
	select {
	case <-p.waited:
	case <-time.After(grace):
		killed = true
		_ = p.cmd.Process.Kill()
		<-p.waited
	}
	p.release()
	p.stopDaemon()
	return p.state, killed
}

// stopDaemon stops Server.Serve's daemon, once the client has ended.
func (p *Proc) stopDaemon() {
	if p.daemon != nil {
		p.daemon.Stop()
		p.daemon = nil
	}
}

// release closes our end of the server's output once the reader has read
// what the server left in it (or after a second, should some other process
// hold the pipe open).
func (p *Proc) release() {
	p.Discard()
	select {
	case <-p.Conn.done:
	case <-time.After(time.Second):
	}
	p.stdout.Close()
}

// Kill ends the process at once.
func (p *Proc) Kill() {
	p.stdin.Close()
	_ = p.cmd.Process.Kill()
	<-p.waited
	p.release()
	p.stopDaemon()
}

// clockTick is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux the kernel ABI allows.
const clockTick = 10 * time.Millisecond

// procStat returns the fields of /proc/PID/stat that follow the command
// name, which may hold spaces and parentheses: f[0] is the state, f[1]
// the parent's pid, f[11] and f[12] utime and stime (fields 3, 4, 14 and
// 15 of proc(5)).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed /proc/" + strconv.Itoa(pid) + "/stat")
	}
	return strings.Fields(string(b[i+1:])), nil
}

// exited reports whether pid has exited: it is gone, or a zombie not yet
// reaped (by us, or by a parent that is not us).
func exited(pid int) bool {
	f, err := procStat(pid)
	return err != nil || len(f) == 0 || f[0] == "Z"
}

// liveChildren maps every process to its live (not zombie) children, from
// one pass over /proc.
func liveChildren() map[int][]int {
	entries, _ := os.ReadDir("/proc")
	kids := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil || len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			kids[ppid] = append(kids[ppid], pid)
		}
	}
	return kids
}

// children returns the pids of pid's live children.
func children(pid int) []int { return liveChildren()[pid] }

// processTree is pid and its live descendants, parents before their
// children, from one pass over /proc (a gateway's tree is a process per
// session, and more: a pass per process would read /proc that many
// times over).
func processTree(pid int) []int {
	kids := liveChildren()
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, kids[tree[i]]...)
	}
	return tree
}

// ProcStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM:
// the kernel reports them in kB).
func ProcStatus(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// NoFileLimit returns the "Max open files" line of /proc/PID/limits, as
// "soft/hard".
func NoFileLimit(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return "?"
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + "/" + f[1]
			}
		}
	}
	return "?"
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
