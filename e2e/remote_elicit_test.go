package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// TestRemoteLoginElicited: a remote server behind the test authorization
// server (fakeremote -oauth), beside a healthy one, hosted by snodod and
// reached through snodod connect (docs/upstreams.md §9, "Login through the
// client"). A client without URL-mode elicitation is told to run snodod
// login; one that declines the elicitation is told the same; one that
// declares it (the official Go SDK client at 2025-11-25) is asked to open
// the login's URL, its call waits for the login, it is told
// notifications/elicitation/complete and gets its answer; later calls
// need nothing more; an HTTP session is not asked (it is no one uid's).
// Once the server was listed, a logout makes the call itself ask, at
// 2025-11-25 and 2026-07-28. The healthy server answers all along.
func TestRemoteLoginElicited(t *testing.T) {
	guarded := startFakeRemote(t, "-oauth", "-name", "guarded")
	healthy := startFakeRemote(t, "-name", "healthy")
	d := startDaemon(t, fmt.Sprintf("[mcpServers.guarded]\nurl = %q\n\n[mcpServers.healthy]\nurl = %q\n", guarded, healthy), nil, "--http", "127.0.0.1:0")

	// browse follows a login's URL as a person's browser would, to the
	// daemon's loopback listener, which completes the login.
	browse := func(u string) error {
		hc := &http.Client{Timeout: 15 * time.Second}
		resp, err := hc.Get(u)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the login page answered %s", resp.Status)
		}
		return nil
	}
	type elicitation struct{ mode, url, id string }
	var mu sync.Mutex
	var asked []elicitation
	var completed []string
	overHTTP := false
	connectAt := func(version, view string, caps *mcp.ClientCapabilities, action string) *mcp.ClientSession {
		t.Helper()
		opts := &mcp.ClientOptions{Capabilities: caps}
		if action != "" {
			opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, elicitation{req.Params.Mode, req.Params.URL, req.Params.ElicitationID})
				mu.Unlock()
				if action == "accept" {
					// A client opens the URL and answers at once; the
					// login completes later, out of band.
					go func() {
						if err := browse(req.Params.URL); err != nil {
							t.Errorf("the browser: %v", err)
						}
					}()
				}
				if action == "wait" {
					return &mcp.ElicitResult{Action: "accept"}, nil
				}
				return &mcp.ElicitResult{Action: action}, nil
			}
			opts.ElicitationCompleteHandler = func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
				mu.Lock()
				completed = append(completed, req.Params.ElicitationID)
				mu.Unlock()
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "snodod-e2e-elicit", Version: "1"}, opts)
		args := []string{"connect"}
		if view != "" {
			args = append(args, view)
		}
		var transport mcp.Transport = &mcp.CommandTransport{Command: d.command(args...)}
		if overHTTP {
			st := d.statusJSON(t)
			transport = &mcp.StreamableClientTransport{Endpoint: "http://" + st.HTTP.Listen + st.HTTP.Path + "/" + view}
		}
		cs, err := client.Connect(t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect %s: %v", view, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	// A client of action "wait" accepts without opening the URL: another
	// client's visit completes the one login they share.
	connect := func(view string, caps *mcp.ClientCapabilities, action string) *mcp.ClientSession {
		t.Helper()
		return connectAt("2025-11-25", view, caps, action)
	}
	echo := func(cs *mcp.ClientSession, tool string) (string, error) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}})
		switch {
		case err != nil:
			return "", err
		case res.IsError:
			return "", errors.New(resultText(res))
		}
		return resultText(res), nil
	}
	urlMode := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}

	aggregated := connect("", nil, "")
	if _, err := echo(connect("guarded", nil, ""), "echo"); err == nil || !strings.Contains(err.Error(), "needs a login: run snodod login guarded") {
		t.Errorf("a client without URL elicitation: %v", err)
	}
	if got, err := echo(aggregated, "healthy__echo"); err != nil || got != "healthy: hi" {
		t.Errorf("the healthy server beside it: %q %v", got, err)
	}
	// Form elicitation only is no URL elicitation.
	formOnly := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
	if _, err := echo(connect("guarded", formOnly, "accept"), "echo"); err == nil || !strings.Contains(err.Error(), "run snodod login guarded") {
		t.Errorf("a client with form elicitation only: %v", err)
	}
	if _, err := echo(connect("guarded", urlMode, "decline"), "echo"); err == nil ||
		!strings.Contains(err.Error(), "run snodod login guarded") || !strings.Contains(err.Error(), "did not accept") {
		t.Errorf("a client that declines: %v", err)
	}
	// An HTTP session is no one uid's: it is not asked.
	overHTTP = true
	if _, err := echo(connect("guarded", urlMode, "accept"), "echo"); err == nil || !strings.Contains(err.Error(), "run snodod login guarded") {
		t.Errorf("a client over HTTP: %v", err)
	}
	overHTTP = false
	mu.Lock()
	if len(asked) != 1 || asked[0].mode != "url" || !strings.Contains(asked[0].url, "/authorize?") || asked[0].id == "" {
		t.Errorf("the declining client was asked %+v", asked)
	}
	asked = nil
	mu.Unlock()

	elicited := connect("guarded", urlMode, "accept")
	if got, err := echo(elicited, "echo"); err != nil || got != "guarded: hi" {
		t.Fatalf("the call that asked for the login: %q %v", got, err)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0].mode != "url" || !strings.Contains(asked[0].url, "/authorize?") {
		t.Errorf("the client was asked %+v", asked)
	} else if len(completed) != 1 || completed[0] != asked[0].id {
		t.Errorf("completions %v for the elicitation %q", completed, asked[0].id)
	}
	mu.Unlock()
	if got, err := echo(elicited, "echo"); err != nil || got != "guarded: hi" {
		t.Errorf("a second call: %q %v", got, err)
	}
	// The login is the daemon's: every client is served by it.
	if got, err := echo(connect("guarded", nil, ""), "echo"); err != nil || got != "guarded: hi" {
		t.Errorf("another client after the login: %q %v", got, err)
	}
	if got, err := echo(aggregated, "healthy__echo"); err != nil || got != "healthy: hi" {
		t.Errorf("the healthy server after: %q %v", got, err)
	}
	mu.Lock()
	if len(asked) != 1 {
		t.Errorf("the client was asked again: %+v", asked)
	}
	mu.Unlock()
	if st := d.statusJSON(t); !strings.HasPrefix(authOf(st, "guarded"), "ok (expires in ") {
		t.Errorf("status after the login: %+v", st.Upstreams)
	}

	// Two clients calling at once while no login exists share one: both
	// are shown the same URL and id, the one visit serves both.
	if out, err := d.command("logout", "guarded").CombinedOutput(); err != nil {
		t.Fatalf("snodod logout: %v\n%s", err, out)
	}
	mu.Lock()
	asked, completed = nil, nil
	mu.Unlock()
	waiting := connect("guarded", urlMode, "wait")
	waited := make(chan error, 1)
	go func() {
		got, err := echo(waiting, "echo")
		if err == nil && got != "guarded: hi" {
			err = fmt.Errorf("answered %q", got)
		}
		waited <- err
	}()
	if !eventually.Within(answerWithin, func() bool { mu.Lock(); defer mu.Unlock(); return len(asked) == 1 }) {
		t.Fatal("the waiting client was not asked")
	}
	if got, err := echo(connect("guarded", urlMode, "accept"), "echo"); err != nil || got != "guarded: hi" {
		t.Errorf("the client that logs in: %q %v", got, err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("the waiting client: %v", err)
		}
	case <-time.After(answerWithin):
		t.Error("the waiting client's call did not end")
	}
	mu.Lock()
	if len(asked) != 2 || asked[0] != asked[1] || len(completed) != 2 {
		t.Errorf("two clients at once were asked %+v, told complete %v", asked, completed)
	}
	mu.Unlock()

	// A server listed before (its catalog known) whose login is gone:
	// the call itself asks, at both eras.
	for _, version := range []string{"2025-11-25", v2026} {
		if out, err := d.command("logout", "guarded").CombinedOutput(); err != nil {
			t.Fatalf("snodod logout: %v\n%s", err, out)
		}
		if _, err := echo(connectAt(version, "guarded", nil, ""), "echo"); err == nil || !strings.Contains(err.Error(), "run snodod login guarded") {
			t.Errorf("%s: a client without URL elicitation after the logout: %v", version, err)
		}
		mu.Lock()
		asked, completed = nil, nil
		mu.Unlock()
		if got, err := echo(connectAt(version, "", urlMode, "accept"), "guarded__echo"); err != nil || got != "guarded: hi" {
			t.Errorf("%s: the call that asked for the login again: %q %v", version, got, err)
		}
		mu.Lock()
		if len(asked) != 1 || asked[0].mode != "url" || !strings.Contains(asked[0].url, "/authorize?") {
			t.Errorf("%s: the client was asked %+v", version, asked)
		} else if version != v2026 && (len(completed) != 1 || completed[0] != asked[0].id) {
			t.Errorf("%s: completions %v for the elicitation %q", version, completed, asked[0].id)
		}
		mu.Unlock()
		if got, err := echo(aggregated, "healthy__echo"); err != nil || got != "healthy: hi" {
			t.Errorf("%s: the healthy server: %q %v", version, got, err)
		}
	}
}

// authOf is the auth state status shows for the remote server name.
func authOf(st *control.Status, name string) string {
	for _, u := range st.Upstreams {
		if u.Name == name {
			return u.Auth
		}
	}
	return ""
}

// TestRemoteLoginElicitedNeverListed: a 2026 client calling a tool of a
// remote server that needs a login and was never listed (no cache, so
// its tool is not in any catalog yet) is asked through input_required
// too, as when the call itself needs the login; its retry waits for the
// login and is answered. Through the aggregated view and a pass-through
// one; a client without URL elicitation is told to run snodod login.
func TestRemoteLoginElicitedNeverListed(t *testing.T) {
	for _, view := range []string{"", "guarded"} {
		t.Run("view="+view, func(t *testing.T) {
			guarded := startFakeRemote(t, "-oauth", "-name", "guarded")
			d := startDaemon(t, fmt.Sprintf("[mcpServers.guarded]\nurl = %q\n", guarded), nil)
			var mu sync.Mutex
			var asked []string
			connect := func(caps *mcp.ClientCapabilities) *mcp.ClientSession {
				t.Helper()
				opts := &mcp.ClientOptions{Capabilities: caps, ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Mode+" "+req.Params.URL)
					mu.Unlock()
					u := req.Params.URL
					go func() {
						// A person's browser, later than the answer.
						resp, err := (&http.Client{Timeout: 15 * time.Second}).Get(u)
						if err != nil {
							t.Errorf("the browser: %v", err)
							return
						}
						resp.Body.Close()
					}()
					return &mcp.ElicitResult{Action: "accept"}, nil
				}}
				client := mcp.NewClient(&mcp.Implementation{Name: "snodod-e2e-never-listed", Version: "1"}, opts)
				args := []string{"connect"}
				if view != "" {
					args = append(args, view)
				}
				cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: d.command(args...)}, &mcp.ClientSessionOptions{ProtocolVersion: v2026})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				t.Cleanup(func() { _ = cs.Close() })
				return cs
			}
			tool := "guarded__echo"
			if view != "" {
				tool = "echo"
			}
			call := func(cs *mcp.ClientSession) (string, error) {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}})
				switch {
				case err != nil:
					return "", err
				case res.IsError:
					return "", errors.New(resultText(res))
				}
				return resultText(res), nil
			}
			if _, err := call(connect(nil)); err == nil || !strings.Contains(err.Error(), "run snodod login guarded") {
				t.Errorf("a client without URL elicitation: %v", err)
			}
			urlMode := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
			if got, err := call(connect(urlMode)); err != nil || got != "guarded: hi" {
				t.Fatalf("the call that asked for the login: %q %v", got, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !strings.HasPrefix(asked[0], "url ") || !strings.Contains(asked[0], "/authorize?") {
				t.Errorf("the client was asked %q", asked)
			}
		})
	}
}
