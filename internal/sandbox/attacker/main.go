// Command attacker is the hosted server of the sandbox's attack suite
// (internal/sandbox/attack_test.go): started through the launcher, it tries
// one thing a hostile MCP server would and prints what happened as one JSON
// line, {"ok":…,"errno":…,"detail":…}. Its targets come in the
// environment (ATTACK_PATH, ATTACK_ADDR, ATTACK_PID), never in argv: the
// sandbox grants the directories a command's arguments name.
//
//	attacker read|write|connect|unix|ptrace|environ|signal|mount|forkbomb|alloc|escape|hello
//
// "attacker mcp" is the same as a hosted MCP server (NDJSON on stdin and
// stdout), for the suite run through the daemon: its one tool, attack,
// runs the attacker again as a child with {"mode", "path", "addr", "pid",
// "marker"}
// as its ATTACK_* variables and answers with the child's JSON line.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type result struct {
	OK     bool   `json:"ok"`
	Errno  string `json:"errno,omitempty"`
	Detail string `json:"detail,omitempty"`
	Count  int64  `json:"count,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attacker MODE")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "hello":
		// The benchmark's server: one byte at once, then wait for stdin's end.
		os.Stdout.Write([]byte{'!'})
		_, _ = bufio.NewReader(os.Stdin).ReadByte()
		return
	case "sleeper":
		for {
			time.Sleep(time.Hour)
		}
	case "escapee":
		escapee()
		return
	case "mcp":
		serveMCP()
		return
	}
	var r result
	switch os.Args[1] {
	case "read":
		b, err := os.ReadFile(os.Getenv("ATTACK_PATH"))
		r = outcome(err, string(b))
	case "write":
		r = outcome(os.WriteFile(os.Getenv("ATTACK_PATH"), []byte("pwned\n"), 0o644), "")
	case "connect":
		c, err := net.DialTimeout("tcp", os.Getenv("ATTACK_ADDR"), 5*time.Second)
		if err == nil {
			c.Close()
		}
		r = outcome(err, "")
	case "unix":
		c, err := net.Dial("unix", os.Getenv("ATTACK_PATH"))
		if err == nil {
			c.Close()
		}
		r = outcome(err, "")
	case "ptrace":
		pid := target()
		err := unix.PtraceAttach(pid)
		if err == nil {
			_ = unix.PtraceDetach(pid)
		}
		r = outcome(err, strconv.Itoa(pid))
	case "environ":
		b, err := os.ReadFile("/proc/" + strconv.Itoa(target()) + "/environ")
		r = outcome(err, string(b))
	case "signal":
		r = outcome(unix.Kill(target(), 0), "")
	case "mount":
		r = outcome(unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""), "")
	case "forkbomb":
		r = forkbomb()
	case "alloc":
		r = alloc()
	case "escape":
		escape()
		return
	default:
		fmt.Fprintln(os.Stderr, "attacker: unknown mode", os.Args[1])
		os.Exit(2)
	}
	emit(r)
}

func emit(r result) {
	b, _ := json.Marshal(r)
	os.Stdout.Write(append(b, '\n'))
}

// outcome turns an error into a result naming its errno.
func outcome(err error, detail string) result {
	if err == nil {
		return result{OK: true, Detail: detail}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return result{Errno: unix.ErrnoName(errno), Detail: err.Error()}
	}
	return result{Errno: "other", Detail: err.Error()}
}

// target is ATTACK_PID, or the parent's pid for "parent".
func target() int {
	s := os.Getenv("ATTACK_PID")
	if s == "parent" {
		return os.Getppid()
	}
	n, _ := strconv.Atoi(s)
	return n
}

// forkbomb forks children that only pause, until the kernel refuses one,
// and reports how many it got. The children are raw forks (one thread
// each, no Go runtime to start), so the count is processes, not threads.
func forkbomb() result {
	var n int64
	for n < 100000 {
		pid, errno := rawFork()
		if errno != 0 {
			r := outcome(errno, "")
			r.Count = n
			return r
		}
		if pid == 0 {
			pauseForever()
		}
		n++
	}
	return result{OK: true, Count: n}
}

// rawFork is fork(2) without the runtime's involvement.
func rawFork() (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0)
	return int(r), errno
}

// pauseForever runs in a raw fork's child: only raw syscalls, no stack
// growth, no allocation.
//
//go:nosplit
func pauseForever() {
	for {
		syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
	}
}

// alloc maps private writable memory in 16 MiB pieces until the kernel
// refuses, and reports the bytes it got.
func alloc() result {
	const chunk = 16 << 20
	var total int64
	for total < 64<<30 {
		_, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			r := outcome(err, "")
			r.Count = total
			return r
		}
		total += chunk
	}
	return result{OK: true, Count: total}
}

// escape starts an escapee (a new session, SIGTERM ignored), reports its
// pid once it is ready, and then ignores SIGTERM itself and waits.
func escape() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	cmd := exec.Command(os.Args[0], "escapee", os.Getenv("ATTACK_MARKER"))
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		emit(outcome(err, ""))
		return
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		emit(outcome(err, ""))
		return
	}
	emit(result{OK: true, Detail: line})
	for {
		time.Sleep(time.Hour)
	}
}

// escapee leaves its session and process group, ignores SIGTERM, and says
// so.
func escapee() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	if _, err := unix.Setsid(); err != nil {
		fmt.Println("setsid:", err)
		return
	}
	fmt.Println("escaped")
	for {
		time.Sleep(time.Hour)
	}
}

// serveMCP answers initialize, tools/list, tools/call (attack) and ping,
// and -32601 to anything else (the daemon's era probe included), one line
// at a time, until stdin ends.
func serveMCP() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string            `json:"protocolVersion"`
				Arguments       map[string]string `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue // a notification
		}
		var res any
		switch req.Method {
		case "initialize":
			res = map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "attacker", "version": "1"}}
		case "ping":
			res = map[string]any{}
		case "tools/list":
			res = map[string]any{"tools": []any{map[string]any{"name": "attack", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			a := req.Params.Arguments
			cmd := exec.Command("/proc/self/exe", a["mode"])
			cmd.Env = append(os.Environ(), "ATTACK_PATH="+a["path"], "ATTACK_ADDR="+a["addr"], "ATTACK_PID="+a["pid"], "ATTACK_MARKER="+a["marker"])
			text, err := runAttack(cmd)
			if err != nil {
				b, _ := json.Marshal(result{Errno: "other", Detail: "run: " + err.Error()})
				text = string(b)
			}
			res = map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
		default:
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			os.Stdout.Write(append(b, '\n'))
			continue
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": res})
		os.Stdout.Write(append(b, '\n'))
	}
}

// runAttack runs cmd in a process group of its own, reads its one line,
// and kills the group: what a fork bomb leaves would hold its output open.
func runAttack(cmd *exec.Cmd) (string, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	return line, err
}
