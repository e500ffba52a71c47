package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// nodeVersions are the versions the TypeScript SDK speaks that snodod
// serves: its newest, 2025-11-25, and 2025-06-18 (it has no 2026 support).
var nodeVersions = []string{"2025-06-18", "2025-11-25"}

// tsSession is what e2e/node/client.mjs observed in one session.
type tsSession struct {
	Version          string
	Errors           map[string]string
	Negotiated       string
	ServerName       string
	Tools            []string
	Echo             string
	Image            struct{ Type, MIMEType, Data string }
	FailIsError      bool
	StaticText       string
	Template         string
	Prompt           []string
	Completion       []string
	Sleep            string
	Progress         []struct{ Progress, Total float64 }
	Cancelled        string
	CancelledAfterMs int
	AfterCancel      string
	Stray            []json.RawMessage
	Logs             []string
	Updated          bool
	ToolsChanged     bool
	InputRequired    struct {
		Code    int
		Message string
	}
	ExitCode *int
	Signal   *string
	Stderr   string
}

// TestTypeScriptSDK runs the official TypeScript client (pinned in
// e2e/node/package.json, installed by `npm ci --prefix e2e/node`) against
// snodod and checks what it saw.
func TestTypeScriptSDK(t *testing.T) {
	for _, s := range runTypeScript(t, append([]string{binary}, nodeVersions...)...) {
		t.Run(s.Version, func(t *testing.T) { checkTypeScript(t, s, false) })
	}
}

// runTypeScript runs e2e/node/client.mjs with args and returns the
// sessions it observed, one per version of nodeVersions.
func runTypeScript(t *testing.T, args ...string) []tsSession {
	t.Helper()
	node, dir := nodeClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Env = isolatedEnv(t.TempDir()) // the snodod it starts inherits it
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	var summary struct {
		Sessions []tsSession
	}
	if err := json.Unmarshal(stdout.Bytes(), &summary); err != nil {
		t.Fatalf("summary %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if len(summary.Sessions) != len(nodeVersions) {
		t.Fatalf("%d sessions, want %d: %s", len(summary.Sessions), len(nodeVersions), stdout.String())
	}
	return summary.Sessions
}

// nodeClient returns node and the directory of the TypeScript client
// scripts, e2e/node, with its packages installed; it skips (or under
// CI=true fails) the test without them.
func nodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		skipOrFail(t, "the TypeScript SDK client needs node and its packages; make test installs them, or run: npm ci --prefix e2e/node ("+err.Error()+")")
	}
	return node, dir
}

// checkTypeScript checks one session; overHTTP: it was over Streamable
// HTTP, where no process exits and a legacy handler may ask its client
// for input (this one declared no elicitation: the tool says so).
func checkTypeScript(t *testing.T, s tsSession, overHTTP bool) {
	for step, err := range s.Errors {
		t.Errorf("step %s failed: %s", step, err)
	}
	check := func(what string, ok bool, got any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: got %+v", what, got)
		}
	}
	check("negotiated version", s.Negotiated == s.Version && s.ServerName == "snodod", s.Negotiated+" "+s.ServerName)
	check("tools/list", slices.Contains(s.Tools, "echo") && slices.Contains(s.Tools, "test_simple_text"), s.Tools)
	check("echo", s.Echo == "hello", s.Echo)
	check("image", s.Image.Type == "image" && s.Image.MIMEType == "image/png" && s.Image.Data == pngBase64, s.Image)
	check("fail", s.FailIsError, s.FailIsError)
	check("resources/read", s.StaticText == "This is the content of the static text resource.", s.StaticText)
	check("template read", s.Template == `{"id":"7","templateTest":true,"data":"Data for ID: 7"}`, s.Template)
	check("prompts/get", slices.Equal(s.Prompt, []string{"Prompt with arguments: arg1='a', arg2='b'"}), s.Prompt)
	check("completion/complete", slices.Equal(s.Completion, []string{"paris", "park", "party"}), s.Completion)
	check("sleep", s.Sleep == "done", s.Sleep)
	progressOK := len(s.Progress) >= 2
	for i, p := range s.Progress {
		progressOK = progressOK && p.Total == 350 && (i == 0 || p.Progress > s.Progress[i-1].Progress)
	}
	check("progress before the result", progressOK, s.Progress)
	check("cancelled call", strings.HasPrefix(s.Cancelled, "rejected") && s.CancelledAfterMs < 3000, s.Cancelled)
	check("call after cancel", s.AfterCancel == "still here", s.AfterCancel)
	check("nothing written for the cancelled request", len(s.Stray) == 0, s.Stray)
	check("log messages", slices.Equal(s.Logs, []string{"Tool execution started", "Tool processing data", "Tool execution completed"}), s.Logs)
	check("resources/subscribe and an update", s.Updated, s.Updated)
	check("notifications/tools/list_changed", s.ToolsChanged, s.ToolsChanged)
	// The client declares no elicitation capability, so nothing is sent to
	// it and the tool call is answered as docs/protocol.md §14.2 case 9 says.
	check("input request refused", s.InputRequired.Code == -32603 &&
		strings.Contains(s.InputRequired.Message, "Client does not support elicitation/create"), s.InputRequired)
	if !overHTTP {
		check("exit status 0", s.ExitCode != nil && *s.ExitCode == 0, s.ExitCode)
	}
	if strings.Contains(s.Stderr, "DATA RACE") {
		t.Errorf("the race detector reported a race in snodod:\n%s", s.Stderr)
	} else if t.Failed() {
		t.Logf("snodod's standard error:\n%s", s.Stderr)
	}
}
