package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// TestConfiguredToolOverUpstream pins a bug: a [tools.X] named as a
// hosted server's tool is in the aggregated view ([tools.fake__echo]
// beside a hosted fake with its echo tool) is served, the daemon's own
// catalog first (docs/upstreams.md §2), and the upstream's tool is listed
// as collided: in snodod stdio, in the daemon, and after a reload, which
// refused it before ("taken by a tool snodod serves itself"). config check
// warns, naming both.
func TestConfiguredToolOverUpstream(t *testing.T) {
	fake := fakeUpstream(t)
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	upstream := fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nstart = \"eager\"\n", fake)
	own := "[tools.fake__echo]\ncommand = [\"/bin/echo\", \"own\"]\ndescription = \"snodod's own\"\n"
	collided := "tool fake__echo (taken by snodod's own catalog)"

	// The listing shows the configured tool, once, and the upstream's
	// others.
	ownListed := func(t *testing.T, cs *mcp.ClientSession, what string) {
		t.Helper()
		var echo []string
		for tool, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatalf("%s: tools/list: %v", what, err)
			}
			if tool.Name == "fake__echo" {
				echo = append(echo, tool.Description)
			}
		}
		if !slices.Equal(echo, []string{"snodod's own"}) {
			t.Errorf("%s: fake__echo listed as %q, want snodod's own tool once", what, echo)
		}
	}

	// Twice: the first without the fake's catalog cache (its tools join
	// once it lists them), the second with it (they are there at once).
	for _, run := range []string{"stdio", "stdio with the catalog cache"} {
		t.Run(run, func(t *testing.T) {
			path := filepath.Join(dir, "stdio.toml")
			if err := os.WriteFile(path, []byte(upstream+own), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, "stdio", "--config", path)
			cmd.Env = isolatedEnv(dir)
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("snodod stdio refused the configuration: %v\n%s", err, stderr.String())
			}
			defer cs.Close()
			if !eventually.Within(answerWithin, func() bool {
				res, err := cs.ListTools(t.Context(), nil)
				return err == nil && slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == "fake__slow" })
			}) {
				t.Fatalf("the fake's tools never joined the view\n%s", stderr.String())
			}
			ownListed(t, cs, run)
		})
	}

	t.Run("daemon", func(t *testing.T) {
		d := startDaemonIn(t, dir, upstream+own, nil)
		d.awaitStatus(t, "the fake ready and collided", answerWithin, func(st *control.Status) bool {
			return len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready" && slices.Contains(st.Upstreams[0].Collided, collided)
		})
		c := connectGoVia(t, d, "2025-11-25")
		ownListed(t, c.cs, "daemon")
		if got := text(t, c.call(t, t.Context(), "fake__echo", nil)); got != "own\n" {
			t.Errorf("fake__echo answered %q, want the configured tool's", got)
		}

		// A reload keeps it (the name is the configuration's, not the
		// relayed item's), and adds it when it was not there before.
		d.writeConfig(t, upstream+own+"# again\n")
		d.signal(t, syscall.SIGHUP)
		if !eventually.Within(answerWithin, func() bool { return strings.Count(d.stderr.String(), "configuration reloaded") == 1 }) {
			t.Fatalf("the reload was refused:\n%s", d.stderr.String())
		}
		d.writeConfig(t, upstream)
		d.signal(t, syscall.SIGHUP)
		d.awaitStatus(t, "the upstream's echo back", answerWithin, func(st *control.Status) bool {
			return len(st.Upstreams) == 1 && len(st.Upstreams[0].Collided) == 0
		})
		d.writeConfig(t, upstream+own)
		d.signal(t, syscall.SIGHUP)
		d.awaitStatus(t, "collided again after the reload", answerWithin, func(st *control.Status) bool {
			return len(st.Upstreams) == 1 && slices.Contains(st.Upstreams[0].Collided, collided)
		})
		if log := d.stderr.String(); strings.Contains(log, "reload refused") {
			t.Errorf("a reload was refused:\n%s", log)
		}
		after := connectGoVia(t, d, "2025-11-25")
		ownListed(t, after.cs, "after the reload")
	})

	t.Run("check", func(t *testing.T) {
		path := filepath.Join(dir, "check.toml")
		if err := os.WriteFile(path, []byte(upstream+own), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, "config", "check", path)
		cmd.Env = isolatedEnv(dir)
		out, err := cmd.CombinedOutput()
		want := `warning: tools.fake__echo: is also the name of mcpServers.fake's tool echo in the aggregated view, if fake has one: snodod's own tool wins, and fake's is not listed (snodod status shows it as collided)`
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("config check: %v\n%s\nwant the line %s", err, out, want)
		}
	})
}
