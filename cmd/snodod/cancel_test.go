//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
)

// TestCancelledRelayLoggedAtDebug: a client cancelling a relayed call is
// normal, not an error of the daemon's: the log says so at debug, read
// from the daemon's own standard error.
func TestCancelledRelayLoggedAtDebug(t *testing.T) {
	dir := sockDir(t)
	config := filepath.Join(dir, "snodod.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nstart = \"eager\"\n", fakebuild.Build(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, "--config", config, "--log-level", "debug")
	fakeRow(t, p, control.StateReady)
	c := dialLines(t, p.socket)
	c.ask(t, initWith("t", "1"))
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fake__slow","arguments":{"ms":60000,"announce":true},"_meta":{"progressToken":"p"}}}`,
	} {
		if _, err := fmt.Fprintln(c.c, line); err != nil {
			t.Fatal(err)
		}
	}
	// The call runs on the fake once its progress arrives.
	if got := c.next(t, `"notifications/progress"`); !strings.Contains(got, `"progressToken":"p"`) {
		t.Fatalf("progress: %q", got)
	}
	fmt.Fprintln(c.c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user pressed Esc"}}`)
	fmt.Fprintln(c.c, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if got := c.next(t, `"id":`); got != `{"jsonrpc":"2.0","id":3,"result":{}}`+"\n" {
		t.Fatalf("after the cancel: %q (nothing is written for a cancelled request)", got)
	}
	// The handler's end is logged once the cancel has reached it: wait
	// for it in the daemon's own log (snodod logs) before stopping it.
	if !eventually.Within(30*time.Second, func() bool {
		return strings.Contains(runIn(t, p.env, "", "logs", "--socket", p.socket).stdout, "relayed request")
	}) {
		t.Fatal("the end of the cancelled call was never logged")
	}
	if status := p.stop(t); status != 0 {
		t.Fatalf("serve: %d\n%s", status, p.stderr.String())
	}
	log := p.stderr.String()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged at ERROR: %s", line)
		}
	}
	if !strings.Contains(log, `level=DEBUG msg="relayed request cancelled by its client" method=tools/call name=fake__slow`) {
		t.Errorf("no debug line for the cancelled call:\n%s", log)
	}
}
