//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
)

// What `snodod status` says (docs/upstreams.md §8), read
// from the real binary's output: who each session is and what it sees,
// which sessions used a hosted server, a failed server's way back, a
// refused reload, and a table that stays a table.

// lineConn is a raw NDJSON client of the session socket.
type lineConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialLines(t *testing.T, path string) *lineConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lineConn{c: c, r: bufio.NewReader(c)}
}

// ask writes line and returns the next answer read (notifications
// meanwhile are skipped).
func (l *lineConn) ask(t *testing.T, line string) string {
	t.Helper()
	if _, err := io.WriteString(l.c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	return l.next(t, `"id":`)
}

// next returns the next line that contains want, skipping the others
// (notifications the daemon may send meanwhile).
func (l *lineConn) next(t *testing.T, want string) string {
	t.Helper()
	_ = l.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		got, err := l.r.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if strings.Contains(got, want) {
			return got
		}
	}
}

func initWith(name, version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":%q,"version":%q}}}`, name, version)
}

// statusOf runs `snodod status` (--json when asJSON) against p.
func statusOf(t *testing.T, p *serveProcess) (string, *control.Status) {
	t.Helper()
	r := runIn(t, p.env, "", "status", "--socket", p.socket)
	j := runIn(t, p.env, "", "status", "--json", "--socket", p.socket)
	if r.status != 0 || j.status != 0 {
		t.Fatalf("status: %d %d\n%s%s", r.status, j.status, r.stderr, j.stderr)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(j.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, j.stdout)
	}
	return r.stdout, &st
}

// TestStatusSessionClients: each session's row names its client (the
// clientInfo of its initialize, or of its 2026 _meta) and its view; a
// hosted server's SESSIONS counts the sessions that used it, not every
// session of the aggregated view.
func TestStatusSessionClients(t *testing.T) {
	p := serveFake(t)
	if r := runIn(t, p.env, "", "upstream", "start", "fake", "--socket", p.socket); r.status != 0 {
		t.Fatalf("start: %d %s", r.status, r.stderr)
	}
	legacy := dialLines(t, p.socket)
	legacy.ask(t, initWith("t", "1"))
	modern := dialLines(t, p.socket)
	modern.ask(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"modern","version":"2.0"}}}}`)

	// A pass-through session, through connect.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := exec.CommandContext(ctx, binary, "connect", "fake", "--socket", p.socket)
	conn.Env = p.env
	in, err := conn.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := conn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, initWith("other", "3.1"))
	if !bufio.NewScanner(out).Scan() {
		t.Fatal("no answer through connect fake")
	}

	table, st := statusOf(t, p)
	if len(st.Sessions) != 3 {
		t.Fatalf("%d sessions:\n%s", len(st.Sessions), table)
	}
	want := []struct{ client, view, via string }{{"t 1", "", "socket"}, {"modern 2.0", "", "socket"}, {"other 3.1", "fake", "connect"}}
	for i, s := range st.Sessions {
		got := "-"
		if s.Client != nil {
			got = s.Client.Name + " " + s.Client.Version
		}
		if got != want[i].client || s.View != want[i].view || s.Via != want[i].via {
			t.Errorf("session %d: client %q, view %q, via %q; want %+v", s.ID, got, s.View, s.Via, want[i])
		}
	}
	for _, cells := range [][]string{{"t 1", "aggregated"}, {"modern 2.0", "aggregated"}, {"other 3.1", "fake"}} {
		if !tableHas(table, "CLIENT", cells...) {
			t.Errorf("the table has no row with %q:\n%s", cells, table)
		}
	}
	if n := st.Upstreams[0].Sessions; n != 1 {
		t.Errorf("fake's SESSIONS is %d, want 1 (the pass-through; the aggregated sessions never used it)", n)
	}
	// An aggregated session that calls one of its tools has used it.
	if got := legacy.ask(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fake__echo","arguments":{}}}`); !strings.Contains(got, `"result"`) {
		t.Fatalf("fake__echo: %s", got)
	}
	if _, st = statusOf(t, p); st.Upstreams[0].Sessions != 2 {
		t.Errorf("after a call, fake's SESSIONS is %d, want 2", st.Upstreams[0].Sessions)
	}
}

// tableHas reports whether a row of the table under the header containing
// head has every cell of cells, as whole cells.
func tableHas(table, head string, cells ...string) bool {
	in := false
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, head) {
			in = true
			continue
		}
		if !in || line == "" {
			in = in && line != ""
			continue
		}
		ok := true
		for _, c := range cells {
			ok = ok && strings.Contains(" "+line+" ", "  "+c+"  ")
		}
		if ok {
			return true
		}
	}
	return false
}

// TestStatusFailedAndLongExit: a failed server says how it comes back;
// a last exit with a long PATH is cut in the table, whole in --json.
func TestStatusFailedAndLongExit(t *testing.T) {
	dir := sockDir(t)
	fake := fakebuild.Build(t)
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(bin, "gone-server")
	if err := os.Symlink(fake, gone); err != nil {
		t.Fatal(err)
	}
	longPath := bin + ":" + strings.Repeat("/opt/a-rather-long/tool/directory/bin:", 12) + "/usr/bin"
	config := filepath.Join(dir, "snodod.toml")
	text := fmt.Sprintf(`[mcpServers.broken]
command = %q
args = ["-exit-at-start", "3"]
start = "eager"
restart = { max_attempts = 1 }

[mcpServers.gone]
command = "gone-server"
env = { PATH = %q }
start = "manual"
`, fake, longPath)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, "--config", config)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, p.env, "", "upstream", "start", "gone", "--socket", p.socket)
	if r.status != 1 || !strings.HasPrefix(r.stderr, "snodod upstream start: gone did not start: start gone-server: executable file not found") {
		t.Errorf("start gone: %d %q", r.status, r.stderr)
	}
	var table string
	var st *control.Status
	if !eventually.Within(30*time.Second, func() bool {
		// Two queries: the table's may come before the failure that
		// --json's shows.
		table, st = statusOf(t, p)
		return len(st.Upstreams) == 2 && st.Upstreams[0].State == control.StateFailed && strings.Contains(table, "broken: failed")
	}) {
		t.Fatalf("broken never failed:\n%s", table)
	}
	if !strings.Contains(table, "broken: failed after 1 failures: ") || !strings.Contains(table, "; no automatic restarts; next request tries again") {
		t.Errorf("the failed server's line:\n%s", table)
	}
	if !strings.Contains(st.Upstreams[1].LastExit, longPath) {
		t.Errorf("--json's last_exit %q lacks the whole PATH", st.Upstreams[1].LastExit)
	}
	head := strings.Index(table, "UPSTREAM")
	rows := strings.SplitN(table[head:], "\n", 4)[:3]
	for _, row := range rows {
		if n := len([]rune(row)); n > 200 {
			t.Errorf("an upstream row of %d columns:\n%s", n, row)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(rows[2]), "…") {
		t.Errorf("gone's LAST EXIT is not cut:\n%s", rows[2])
	}
}

// TestStatusRefusedReload: a reload refused is a warning in status, in
// the table and in --json, until a reload succeeds.
func TestStatusRefusedReload(t *testing.T) {
	dir := sockDir(t)
	config := filepath.Join(dir, "snodod.toml")
	if err := os.WriteFile(config, []byte("[session]\nwrite_timeout = \"5s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, "--config", config)
	const warning = `reload refused, the running configuration stays: session.write_timeout: must be a positive duration`
	reload := func(text string, refused bool) (string, *control.Status) {
		t.Helper()
		if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		var table string
		var st *control.Status
		if !eventually.Within(30*time.Second, func() bool {
			table, st = statusOf(t, p)
			has := len(st.Warnings) > 0 && strings.HasPrefix(st.Warnings[0], warning)
			return has == refused
		}) {
			t.Fatalf("after SIGHUP (refused %v), status:\n%s%v", refused, table, st.Warnings)
		}
		return table, st
	}
	table, _ := reload("[session]\nwrite_timeout = \"0s\"\n", true)
	if !strings.Contains(table, "warning: "+warning) {
		t.Errorf("the table has no warning of the refused reload:\n%s", table)
	}
	if table, st := reload("[session]\nwrite_timeout = \"6s\"\n", false); len(st.Warnings) != 0 {
		t.Errorf("after a good reload, warnings remain:\n%s", table)
	}
}
