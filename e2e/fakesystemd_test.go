package e2e_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/internal/eventually"
)

// fakeSystemd stands in for systemd's side of a service with socket units,
// Type=notify, NotifyAccess=main, FileDescriptorStoreMax= and
// Restart=on-failure, exactly as sd_notify(3) and sd_listen_fds(3)
// document it:
//
//   - it listens on the sockets (as snodod.socket and snodod-control.socket)
//     and passes them from descriptor 3 on, with LISTEN_FDS,
//     LISTEN_FDNAMES and LISTEN_PID (the pid of the process it started,
//     which a shell wrapper sets as exec keeps it);
//   - it reads the notify socket (NOTIFY_SOCKET, a datagram socket),
//     accepting messages from the main process only (SO_PASSCRED), and
//     keeps READY=1, MAINPID=, and the descriptors of FDSTORE=1 (with
//     SCM_RIGHTS) under their FDNAME=, dropping them on FDSTOREREMOVE=1;
//   - it sets FDSTORE to the store's size;
//   - restart starts the service again, passing the sockets and then the
//     stored descriptors, named as stored.
type fakeSystemd struct {
	t       *testing.T
	d       *daemonProc // its paths and environment; cmd is the process now
	notify  *net.UnixConn
	sockets []*os.File // session, control
	max     int

	mu       sync.Mutex
	store    []storedFD
	main     int // the main pid
	ready    int // READY=1 messages from the main pid
	rejected []string
	done     chan struct{}
}

type storedFD struct {
	name string
	f    *os.File
}

// startFakeSystemd makes the sockets and the notify socket in a new
// directory and starts `snodod serve --demo` under them.
func startFakeSystemd(t *testing.T, config string) *fakeSystemd {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := newDaemonProc(dir)
	if err := os.MkdirAll(filepath.Dir(d.socket), 0o700); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		d.writeConfig(t, config)
	}
	s := &fakeSystemd{t: t, d: d, max: 64, done: make(chan struct{})}
	for _, path := range []string{d.socket, d.control} {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.File()
		ln.SetUnlinkOnClose(false) // the path stays, as systemd's does
		ln.Close()                 // the file keeps the socket
		if err != nil {
			t.Fatal(err)
		}
		s.sockets = append(s.sockets, f)
	}
	notifyPath := filepath.Join(dir, "notify")
	if s.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
	raw, err := s.notify.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
	d.env = append(isolatedEnv(dir), "NOTIFY_SOCKET="+notifyPath, fmt.Sprint("FDSTORE=", s.max))
	go s.readNotify()
	t.Cleanup(func() {
		if p := s.mainPID(); p != 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
			waitGone(p, answerWithin)
		}
		s.notify.Close()
		<-s.done
		closeFiles(s.sockets)
		s.mu.Lock()
		for _, e := range s.store {
			e.f.Close()
		}
		s.mu.Unlock()
		out := d.stderr.String()
		if strings.Contains(out, "DATA RACE") {
			t.Errorf("the race detector reported a race in snodod serve:\n%s", out)
		} else if t.Failed() {
			t.Logf("snodod serve's standard error:\n%s", out)
		}
	})
	s.start()
	return s
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// start starts the service and waits for READY=1 from it.
func (s *fakeSystemd) start() {
	s.t.Helper()
	s.mu.Lock()
	names := []string{"session", "control"}
	files := append([]*os.File(nil), s.sockets...)
	for _, e := range s.store {
		names = append(names, e.name)
		files = append(files, e.f)
	}
	readyBefore := s.ready
	s.mu.Unlock()
	// LISTEN_PID must be the service's own pid: the shell's, which exec
	// keeps.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, binary, "serve", "--demo")
	cmd.Env = append(append([]string(nil), s.d.env...),
		fmt.Sprint("LISTEN_FDS=", len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	cmd.ExtraFiles = files
	logf, err := os.OpenFile(s.d.stderr.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	watch(cmd, exited) // the cleanup of startFakeSystemd kills the main process
	s.mu.Lock()
	s.main = cmd.Process.Pid
	s.mu.Unlock()
	s.d.cmd, s.d.exited = cmd, exited
	if !eventually.Within(answerWithin, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ready > readyBefore
	}) {
		s.t.Fatalf("no READY=1 from the service (pid %d)", cmd.Process.Pid)
	}
}

// crash kills the main process with SIGKILL and starts the service again,
// as Restart=on-failure does.
func (s *fakeSystemd) crash() {
	s.t.Helper()
	pid := s.mainPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	if !waitGone(pid, answerWithin) {
		s.t.Fatalf("pid %d survived SIGKILL", pid)
	}
	s.start()
}

func (s *fakeSystemd) mainPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.main
}

// stored returns the names in the store, and how many descriptors each.
func (s *fakeSystemd) stored() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, e := range s.store {
		out[e.name]++
	}
	return out
}

// rejectedMessages are the messages refused for not coming from the main
// process.
func (s *fakeSystemd) rejectedMessages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rejected...)
}

func (s *fakeSystemd) readNotify() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(253*4)+unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, _, _, err := s.notify.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		var fds []int
		pid := 0
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			} else if cred, err := unix.ParseUnixCredentials(&msgs[i]); err == nil {
				pid = int(cred.Pid)
			}
		}
		s.handle(pid, string(bytes.TrimSpace(buf[:n])), fds)
	}
}

func (s *fakeSystemd) handle(pid int, msg string, fds []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pid != s.main {
		s.rejected = append(s.rejected, fmt.Sprintf("from pid %d (main %d): %q", pid, s.main, msg))
		for _, fd := range fds {
			unix.Close(fd)
		}
		return
	}
	vars := map[string]string{}
	for _, line := range strings.Split(msg, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	name := vars["FDNAME"]
	switch {
	case vars["FDSTORE"] == "1":
		for _, fd := range fds {
			if len(s.store) >= s.max {
				unix.Close(fd)
				continue
			}
			s.store = append(s.store, storedFD{name: name, f: os.NewFile(uintptr(fd), name)})
		}
		fds = nil
	case vars["FDSTOREREMOVE"] == "1":
		kept := s.store[:0]
		for _, e := range s.store {
			if e.name == name {
				e.f.Close()
				continue
			}
			kept = append(kept, e)
		}
		s.store = kept
	}
	for _, fd := range fds { // descriptors with a message that keeps none
		unix.Close(fd)
	}
	if v, ok := vars["MAINPID"]; ok {
		fmt.Sscan(v, &s.main)
	}
	if vars["READY"] == "1" {
		s.ready++
	}
}
