package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
)

// Views (docs/views.md) behind the real binary: snodod connect --view and
// HTTP at http.path/@NAME, with the Go SDK's client.

// viewsConfig hosts two fake upstreams, a and b, and two views: ro holds a
// only, two of its tools, one renamed and described anew, none of its
// resources; echoes holds every server's echo.
func viewsConfig(fake, extra string) string {
	return fmt.Sprintf(`
[mcpServers.a]
command = %[1]q
args = ["-name", "fake-a"]
start = "eager"

[mcpServers.b]
command = %[1]q
args = ["-name", "fake-b"]
start = "eager"

[views.ro]
servers = ["a"]
tools = ["a__echo", "a__slow"]
resources = { exclude = ["fake://res/*", "fake://tpl/*/*"] }
rename = { "a__echo" = "say" }
instructions = "Only a, read-only."

[views.ro.override.say]
description = "Says it back"
annotations = { readOnlyHint = true }

[views.echoes]
tools = ["*__echo"]
%[2]s`, fake, extra)
}

// connectView connects the Go SDK's client through snodod connect with
// args (["--view", "ro"]).
func connectView(t *testing.T, d *daemonProc, args ...string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-views", Version: "1"}, nil)
	cmd := d.command(append([]string{"connect"}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect %v: %v\n%s", args, err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func viewTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// refusedOutside checks that err is the -32602 refusal naming view.
func refusedOutside(t *testing.T, what string, err error, view string) {
	t.Helper()
	var rpc *jsonrpc.Error
	if err == nil || !errors.As(err, &rpc) || rpc.Code != -32602 || !strings.Contains(rpc.Message, "not in view "+view) {
		t.Errorf("%s: %v, want -32602 naming view %s", what, err, view)
	}
}

// TestViewConnect: connect --view ro lists what the view holds, under its
// names and definitions, serves it, and refuses what it does not hold
// (-32602 naming the view), where the aggregated view serves all of it;
// both views and the aggregated one use the same instance of a; status
// shows each session's view, snodod views the counts.
func TestViewConnect(t *testing.T) {
	fake := fakeUpstream(t)
	d := startDaemon(t, viewsConfig(fake, ""), nil)
	awaitReady(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()

	ro := connectView(t, d, "--view", "ro")
	if got := ro.InitializeResult().Instructions; got != "Only a, read-only." {
		t.Errorf("instructions %q", got)
	}
	if got := viewTools(t, ctx, ro); !slices.Equal(got, []string{"a__slow", "say"}) {
		t.Errorf("view ro lists %v, want [a__slow say]", got)
	}
	tools, err := ro.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "say" && (tool.Description != "Says it back" || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
			t.Errorf("say: description %q annotations %+v, want the override", tool.Description, tool.Annotations)
		}
	}
	res, err := ro.CallTool(ctx, &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError {
		t.Fatalf("say: %v %+v", err, res)
	}
	_, err = ro.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{}})
	refusedOutside(t, "a__echo (renamed away)", err, "ro")
	_, err = ro.CallTool(ctx, &mcp.CallToolParams{Name: "b__echo", Arguments: map[string]any{}})
	refusedOutside(t, "b__echo (server b is not in ro)", err, "ro")
	_, err = ro.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fake://res/001"})
	refusedOutside(t, "a resource ro excludes", err, "ro")
	_, err = ro.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__prompt-001"})
	refusedOutside(t, "a prompt of b", err, "ro")
	if _, err := ro.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a__prompt-001"}); err != nil {
		t.Errorf("a's prompt, held by ro: %v", err)
	}

	echoes := connectView(t, d, "--view", "echoes")
	if got := viewTools(t, ctx, echoes); !slices.Equal(got, []string{"a__echo", "b__echo"}) {
		t.Errorf("view echoes lists %v", got)
	}
	agg := connectView(t, d)
	for _, cs := range []*mcp.ClientSession{echoes, agg} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"x": 2}})
		if err != nil || res.IsError {
			t.Fatalf("a__echo: %v %+v", err, res)
		}
	}
	if got := viewTools(t, ctx, agg); !slices.Contains(got, "b__echo") || !slices.Contains(got, "a__echo") {
		t.Errorf("the aggregated view lost tools: %v", got)
	}

	st := d.statusJSON(t)
	var instances []control.Upstream
	for _, u := range st.Upstreams {
		if u.Name == "a" && u.PID != 0 {
			instances = append(instances, u)
		}
	}
	if len(instances) != 1 {
		t.Errorf("server a runs %d instances for three views, want 1: %+v", len(instances), st.Upstreams)
	}
	var views []string
	for _, s := range st.Sessions {
		views = append(views, s.View)
	}
	slices.Sort(views)
	if !slices.Equal(views, []string{"", "@echoes", "@ro"}) {
		t.Errorf("status views %q", views)
	}
	out, err := d.command("status").Output()
	if err != nil || !strings.Contains(string(out), "@ro") {
		t.Errorf("snodod status: %v\n%s", err, out)
	}

	out, err = d.command("views", "--json").Output()
	if err != nil {
		t.Fatalf("snodod views --json: %v", err)
	}
	var rows []control.View
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want := []control.View{
		// b's resources have a's URIs: the aggregated view, and so every
		// view, serves a's (the first claimant).
		{Name: "echoes", Servers: 2, Tools: 2, Resources: 2, Prompts: 2, Sessions: 1},
		{Name: "ro", Servers: 1, Tools: 2, Resources: 0, Prompts: 1, Sessions: 1},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("snodod views: %+v\nwant %+v", rows, want)
	}
	out, err = d.command("views").Output()
	if err != nil || !strings.Contains(string(out), "VIEW") || !strings.Contains(string(out), "echoes") {
		t.Errorf("snodod views: %v\n%s", err, out)
	}
}

// TestViewConnectErrors: an unknown view is refused naming the known
// ones; --view and a server name exclude each other.
func TestViewConnectErrors(t *testing.T) {
	fake := fakeUpstream(t)
	d := startDaemon(t, viewsConfig(fake, ""), nil)
	cmd := d.command("connect", "--view", "nope")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("connect --view nope: %v", err)
	}
	const want = `unknown view "nope"; the views are echoes, ro`
	if !strings.Contains(string(out), `snodod connect --view nope: unknown view \"nope\"; the views are echoes, ro`) || !strings.Contains(string(exit.Stderr), want) {
		t.Errorf("stdout %s\nstderr %s\nwant %q", out, exit.Stderr, want)
	}
	cmd = d.command("connect", "--view", "ro", "a")
	cmd.Stdin = strings.NewReader("")
	_, err = cmd.Output()
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(exit.Stderr), "exclude each other") {
		t.Errorf("connect --view ro a: %v %s", err, stderrOf(err))
	}
	out, _ = d.command("connect", "--help").CombinedOutput()
	if !strings.Contains(string(out), "--view NAME") || !strings.Contains(string(out), "-view NAME") {
		t.Errorf("connect --help does not tell of --view:\n%s", out)
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// TestViewReload: a reload that changes a view applies to new sessions
// and, with list_changed, to the sessions open on it.
func TestViewReload(t *testing.T) {
	fake := fakeUpstream(t)
	d := startDaemon(t, viewsConfig(fake, ""), nil)
	awaitReady(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	changed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-views", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: d.command("connect", "--view", "echoes")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := viewTools(t, ctx, cs); !slices.Equal(got, []string{"a__echo", "b__echo"}) {
		t.Fatalf("before: %v", got)
	}
	d.writeConfig(t, strings.Replace(viewsConfig(fake, ""), `tools = ["*__echo"]`, `tools = ["b__echo"]`, 1))
	d.signal(t, syscall.SIGHUP)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed after the reload changed the view")
	}
	if got := viewTools(t, ctx, cs); !slices.Equal(got, []string{"b__echo"}) {
		t.Errorf("the open session after the reload: %v", got)
	}
	fresh := connectView(t, d, "--view", "echoes")
	if got := viewTools(t, ctx, fresh); !slices.Equal(got, []string{"b__echo"}) {
		t.Errorf("a new session after the reload: %v", got)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{}}); err == nil {
		t.Error("a tool the reload took out of the view is still served")
	}
}

// awaitReady waits until both fakes are listed.
func awaitReady(t *testing.T, d *daemonProc) {
	t.Helper()
	d.awaitStatus(t, "a and b ready", answerWithin, func(st *control.Status) bool {
		ready := 0
		for _, u := range st.Upstreams {
			if u.State == "ready" {
				ready++
			}
		}
		return ready == 2
	})
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	inner http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.inner.RoundTrip(r)
}

// TestViewHTTP: the Go SDK's client at http.path/@ro, in a legacy and the
// 2026 era, with a token of http.tokens naming ro, sees view ro and is
// refused what ro does not hold; an unknown view is no endpoint. Who may
// open which view by uid and by token: daemon/views_access_test.go.
func TestViewHTTP(t *testing.T) {
	fake := fakeUpstream(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "ro.token")
	if err := os.WriteFile(tokenFile, []byte("token = \"ro-0123456789abcdef0123456789abcdef\"\nviews = [\"ro\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, viewsConfig(fake, fmt.Sprintf("\n[http]\nlisten = \"127.0.0.1:0\"\ntokens = [%q]\n", tokenFile)), nil)
	awaitReady(t, d)
	st := d.statusJSON(t)
	base := "http://" + st.HTTP.Listen + st.HTTP.Path
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-views-http", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/@ro",
			HTTPClient: &http.Client{Transport: bearer{"ro-0123456789abcdef0123456789abcdef", http.DefaultTransport}}},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if got := viewTools(t, ctx, cs); !slices.Equal(got, []string{"a__slow", "say"}) {
			t.Errorf("%s: HTTP view ro lists %v", version, got)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"x": 1}})
		if err != nil || res.IsError {
			t.Errorf("%s: say: %v %+v", version, err, res)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__echo", Arguments: map[string]any{}})
		refusedOutside(t, version+": b__echo over HTTP", err, "ro")
		cs.Close()
	}
	// An unknown view is no endpoint; the answer names the views.
	resp, err := http.Post(base+"/@nope", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `No MCP endpoint at /mcp/@nope: unknown view \"nope\"; the views are echoes, ro`) {
		t.Errorf("/@nope: %d %s, want 404 naming the views", resp.StatusCode, body)
	}
}

// TestViewTypeScript: the official TypeScript SDK's client through
// snodod connect --view ro lists ro's tools, calls one, and is refused a
// tool outside the view with -32602 naming it.
func TestViewTypeScript(t *testing.T) {
	node, dir := nodeClient(t)
	fake := fakeUpstream(t)
	d := startDaemon(t, viewsConfig(fake, ""), nil)
	awaitReady(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 2*answerWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "views.mjs", binary, "ro", "say", "b__echo")
	cmd.Dir, cmd.Env = dir, d.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node views.mjs: %v\n%s", err, stderrOf(err))
	}
	var got struct {
		Server       string
		Instructions string
		Tools        []string
		Allowed      struct {
			IsError bool
			Text    string
		}
		Outside struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Server != "snodod@ro" || got.Instructions != "Only a, read-only." || !slices.Equal(got.Tools, []string{"a__slow", "say"}) ||
		got.Allowed.IsError || got.Allowed.Text == "" ||
		got.Outside.Code != -32602 || !strings.Contains(got.Outside.Message, "not in view ro") {
		t.Errorf("the TypeScript client saw %+v", got)
	}
}
