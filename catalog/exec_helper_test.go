package catalog_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// helperVar, in the environment, makes the test binary a program for exec
// tools to run, in the mode it names. Its modes:
//
//	argv        prints its arguments (os.Args[1:]) as one JSON array
//	stdin       copies standard input to standard output
//	env         prints its environment (sorted) and working directory, as JSON
//	fail        writes args[1] to stderr and exits with status args[0]
//	big         writes args[0] bytes of "x" and exits 0
//	json        prints args[0] as it is (the tool's output = "json")
//	progress    writes args[0] progress lines to fd 3, then "done"
//	family      starts a grandchild that ignores SIGTERM, writes "PID PID"
//	            (its own and the grandchild's) to the file args[0], and
//	            waits, ignoring SIGTERM too
//	stubborn    a grandchild of family: ignores SIGTERM and waits
//	gate        creates the file args[0]/started-PID, then waits until
//	            args[0]/release exists
const helperVar = "SNODOD_CATALOG_HELPER"

func helperMain(mode string, args []string) int {
	switch mode {
	case "argv":
		b, _ := json.Marshal(args)
		fmt.Printf("%s", b)
	case "stdin":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case "env":
		wd, _ := os.Getwd()
		b, _ := json.Marshal(map[string]any{"env": os.Environ(), "cwd": wd})
		fmt.Printf("%s", b)
	case "fail":
		code, _ := strconv.Atoi(args[0])
		fmt.Fprint(os.Stderr, args[1])
		fmt.Print("partial output")
		return code
	case "big":
		n, _ := strconv.Atoi(args[0])
		w := bufio.NewWriter(os.Stdout)
		for range n {
			_ = w.WriteByte('x')
		}
		_ = w.Flush()
	case "json":
		fmt.Print(args[0])
	case "progress":
		n, _ := strconv.Atoi(args[0])
		fd3 := os.NewFile(3, "progress")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(fd3, `{"progress":%d,"total":%d,"message":"step %d"}`+"\n", i, n, i)
		}
		fmt.Fprintln(fd3, "not json")
		fmt.Print("done")
	case "family":
		signal.Ignore(syscall.SIGTERM)
		exe, _ := os.Executable()
		child := exec.Command(exe)
		child.Env = append(os.Environ(), helperVar+"=stubborn")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pids := fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)
		if err := os.WriteFile(args[0], []byte(pids), 0o644); err != nil {
			return 1
		}
		_ = child.Wait()
	case "gate":
		_ = os.WriteFile(fmt.Sprintf("%s/started-%d", args[0], os.Getpid()), nil, 0o644)
		for {
			if _, err := os.Stat(args[0] + "/release"); err == nil {
				return 0
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q (%s)\n", mode, strings.Join(args, " "))
		return 2
	}
	return 0
}
