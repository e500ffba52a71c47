package proc

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var quiet = slog.New(slog.DiscardHandler)

// A recorded pid now used by another process (another start time) is never
// killed; the recorded process itself is. Records of version 1 (one file,
// no daemon line) are read too.
func TestKillOrphansMatchesStartTime(t *testing.T) {
	g, err := Start(exec.Command("sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop(0)
	base := filepath.Join(t.TempDir(), "groups")
	for _, header := range []string{recordHeaderV1, recordHeader + "\ndaemon 2147483646 1"} {
		write := func(startTime uint64) {
			path := base
			if header != recordHeaderV1 {
				path = base + ".2147483646" // a daemon that no longer runs
			}
			body := fmt.Sprintf("%s\nboot %s\n%d %d\n", header, BootID(), g.PID(), startTime)
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(g.StartTime() + 1)
		if n, err := KillOrphans(base, quiet); err != nil || n != 0 {
			t.Fatalf("%q: KillOrphans on a recycled pid = %d, %v; want 0", header, n, err)
		}
		if state(g.PID()) == 0 || state(g.PID()) == 'Z' {
			t.Fatal("a process with another start time was killed")
		}
	}
	write := fmt.Sprintf("%s\nboot %s\ndaemon 2147483646 1\n%d %d\n", recordHeader, BootID(), g.PID(), g.StartTime())
	if err := os.WriteFile(base+".2147483646", []byte(write), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := KillOrphans(base, quiet); err != nil || n != 1 {
		t.Fatalf("KillOrphans on the recorded process = %d, %v; want 1", n, err)
	}
	var ee *exec.ExitError
	if err := g.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("recorded process ended with %v, want SIGKILL", err)
	}
	if left, _ := filepath.Glob(base + "*"); len(left) != 0 {
		t.Errorf("records left after KillOrphans: %q", left)
	}
}

// The record of a process that runs (this one: a daemon being upgraded
// keeps its own) is left alone, and so are its groups.
func TestKillOrphansLeavesARunningDaemon(t *testing.T) {
	g, err := Start(exec.Command("sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop(0)
	base := filepath.Join(t.TempDir(), "groups")
	rec, err := OpenGroupRecord(base, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Add(g); err != nil {
		t.Fatal(err)
	}
	if n, err := KillOrphans(base, quiet); err != nil || n != 0 {
		t.Fatalf("KillOrphans = %d, %v; want 0: the record's process runs", n, err)
	}
	if state(g.PID()) != 'S' && state(g.PID()) != 'R' {
		t.Fatalf("the running daemon's group was killed (state %q)", state(g.PID()))
	}
	if b, err := os.ReadFile(rec.Path()); err != nil || !strings.Contains(string(b), fmt.Sprintf("\n%d %d\n", g.PID(), g.StartTime())) {
		t.Fatalf("the running daemon's record: %q %v", b, err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rec.Path()); err != nil {
		t.Errorf("Close removed a record that still holds a group: %v", err)
	}
	if err := rec.Remove(g); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rec.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close kept an empty record: %v", err)
	}
}

func TestKillOrphansRecordFiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		want       string // error substring, "" for none
	}{
		{"missing", "", ""},
		{"other boot", recordHeader + "\nboot not-this-boot\ndaemon 2147483646 1\n2 1\n", ""},
		{"not a record", "hello\n", "not a snodod group record"},
		{"bad line", recordHeader + "\nboot x\nnonsense\n", `"nonsense" is not "PID STARTTIME"`},
		{"bad daemon", recordHeader + "\nboot x\ndaemon me\n", `"daemon me" is not "daemon PID STARTTIME"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if tt.body != "" {
				if err := os.WriteFile(base+".2147483646", []byte(tt.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// A write's temporary file is not a record.
			if err := os.WriteFile(base+".2147483646.12345", []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			n, err := KillOrphans(base, quiet)
			if tt.want == "" && (err != nil || n != 0) {
				t.Errorf("KillOrphans = %d, %v; want 0, nil", n, err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("KillOrphans error = %v, want %q", err, tt.want)
			}
		})
	}
}

// state is the process state letter of pid, 0 when there is no such
// process.
func state(pid int) byte {
	p, err := ReadProcess(pid)
	if err != nil {
		return 0
	}
	return p.State
}
