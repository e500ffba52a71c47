package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/audit"
)

// writeRecords appends records to path as the daemon writes them.
func writeRecords(t *testing.T, path string, recs ...audit.Record) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

func rec(at time.Time, tool, server string) audit.Record {
	return audit.Record{Time: at, Session: 3, Client: &audit.Client{Name: "claude-code", Version: "2.1"}, Server: server,
		Method: "tools/call", Tool: tool, ArgsDigest: "sha256:00", Outcome: "ok", DurationMS: 1.25}
}

// snodod audit reads the rotations oldest first, then the file, and
// filters by tool, server and time; --json prints the lines as written.
func TestAuditFilters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-3 * time.Hour)
	writeRecords(t, audit.Rotated(path, 2), rec(old, "mem__read", "mem"))
	writeRecords(t, audit.Rotated(path, 1), rec(old.Add(time.Minute), "echo", ""))
	bad := rec(now, "mem__write", "mem")
	bad.Outcome, bad.Code = "error", -32602
	writeRecords(t, path, rec(now.Add(-time.Minute), "mem__read", "mem"), bad,
		audit.Record{Time: now, Method: "resources/read", URI: "snodod://upstreams", Outcome: "cancelled"})
	run := func(f audit.Filter, asJSON bool) []string {
		var out bytes.Buffer
		if err := printAudit(context.Background(), &out, path, f, asJSON, false, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	}
	all := run(audit.Filter{}, false)
	if len(all) != 6 || !strings.HasPrefix(all[0], "TIME ") {
		t.Fatalf("table:\n%s", strings.Join(all, "\n"))
	}
	for i, want := range []string{"mem/mem__read", "snodod/echo", "mem/mem__read", "mem/mem__write", "snodod/snodod://upstreams"} {
		if !strings.Contains(all[i+1], want) {
			t.Errorf("row %d %q, want %s (oldest rotation first)", i+1, all[i+1], want)
		}
	}
	if !strings.Contains(all[4], "error -32602") || !strings.Contains(all[5], "cancelled") || !strings.Contains(all[1], "claude-code 2.1") || !strings.Contains(all[1], "1.2ms") {
		t.Errorf("table:\n%s", strings.Join(all, "\n"))
	}
	if got := run(audit.Filter{Tool: "mem__read"}, true); len(got) != 2 {
		t.Errorf("--tool mem__read: %q", got)
	}
	if got := run(audit.Filter{Server: "snodod"}, true); len(got) != 2 {
		t.Errorf("--server snodod: %q", got)
	}
	since, _ := parseSince("1h", now)
	got := run(audit.Filter{Server: "mem", Since: since}, true)
	if len(got) != 2 {
		t.Fatalf("--server mem --since 1h: %q", got)
	}
	var r audit.Record
	if err := json.Unmarshal([]byte(got[1]), &r); err != nil || r.Tool != "mem__write" || r.Code != -32602 {
		t.Errorf("--json line %s: %+v %v", got[1], r, err)
	}
	if _, err := parseSince("yesterday", now); err == nil {
		t.Error("--since yesterday accepted")
	}
	if at, err := parseSince("2026-12-02T10:00:00Z", now); err != nil || !at.Equal(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("--since a time: %v %v", at, err)
	}
	if err := printAudit(context.Background(), &bytes.Buffer{}, filepath.Join(dir, "none"), audit.Filter{}, false, false, time.Millisecond); err == nil {
		t.Error("no file, no error")
	}
}

// syncBuffer is a bytes.Buffer for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), "\n")
}

// --follow prints what is appended, and goes on in the new file after a
// rotation (the old file renamed to .1, what it got before the rename
// read to its end), and from the start of a file truncated.
func TestAuditFollowAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	now := time.Now().UTC()
	writeRecords(t, path, rec(now, "first", ""))
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- printAudit(ctx, &out, path, audit.Filter{}, true, true, time.Millisecond) }()
	waitLines := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for out.lines() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d lines, want %d:\n%s", out.lines(), n, out.b.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitLines(1)
	writeRecords(t, path, rec(now, "second", ""))
	waitLines(2)
	// The rotation: a last line to the old file, renamed, a new file.
	writeRecords(t, path, rec(now, "third", ""))
	if err := os.Rename(path, audit.Rotated(path, 1)); err != nil {
		t.Fatal(err)
	}
	writeRecords(t, path, rec(now, "fourth", ""))
	waitLines(4)
	writeRecords(t, path, rec(now, "fifth", ""))
	waitLines(5)
	// logrotate's copytruncate: the file emptied in place.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	writeRecords(t, path, rec(now, "sixth", ""))
	waitLines(6)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	got := out.b.String()
	out.mu.Unlock()
	var tools []string
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, r.Tool)
	}
	if strings.Join(tools, " ") != "first second third fourth fifth sixth" {
		t.Errorf("followed %v", tools)
	}
}
