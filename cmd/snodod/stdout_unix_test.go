//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary run stdoutHelper instead of the tests.
const helperEnv = "SNODOD_TEST_STDOUT_HELPER"

const helperFrame = `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"

// stdoutHelper runs in a child process. It takes standard output as
// snodod stdio does, then writes stray text to fd 1 three ways and one
// frame to the protocol output, and checks the output's modes.
func stdoutHelper() int {
	out, restore, err := takeStdout()
	if err != nil {
		fmt.Fprintln(os.Stderr, "takeStdout:", err)
		return 1
	}
	fmt.Println("stray marker 1")
	os.Stdout.WriteString("stray marker 2\n")
	syscall.Write(1, []byte("stray marker 3\n"))
	if err := out.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		fmt.Fprintln(os.Stderr, "no write deadline on a pipe:", err)
		return 1
	}
	if _, err := out.WriteString(helperFrame); err != nil {
		fmt.Fprintln(os.Stderr, "write frame:", err)
		return 1
	}
	restore()
	raw, err := out.SyscallConn()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	raw.Control(func(fd uintptr) {
		if flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
			fmt.Fprintln(os.Stderr, "still non-blocking after restore:", err)
		}
		if flags, err := unix.FcntlInt(fd, unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			fmt.Fprintln(os.Stderr, "protocol output is inherited by children:", err)
		}
	})
	out.Close()
	return 0
}

// TestStdoutHygiene is docs/transport.md case 74 at the level of descriptors:
// once standard output is taken, only frames reach it and everything else
// written to fd 1 lands on standard error.
func TestStdoutHygiene(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "GORACE=atexit_sleep_ms=10 exitcode=66")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v, stderr:\n%s", err, stderr.String())
	}
	if stdout.String() != helperFrame {
		t.Errorf("stdout = %q, want exactly the frame %q", stdout.String(), helperFrame)
	}
	want := "stray marker 1\nstray marker 2\nstray marker 3\n"
	if stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}
