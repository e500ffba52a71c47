package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRemoteLogin: the TypeScript SDK's example server behind its demo
// OAuth provider (strict: tokens must be for its resource), hosted by
// snodod. A call before any login is told to run snodod login; snodod
// login completes headless through $BROWSER (the daemon's loopback
// listener takes the redirect) and the Go SDK client's calls through
// snodod connect then succeed; the token is in the state directory, 0600,
// and in no status, log or printed configuration; snodod logout forgets
// it; snodod login --no-browser takes the pasted redirect URL.
func TestRemoteLogin(t *testing.T) {
	endpoint := tsOAuthExample(t)
	d := startDaemon(t, "[mcpServers.example]\nurl = \""+endpoint+"\"\n", []string{"BROWSER=" + conformanceClient(t) + " browse"})
	greet := func() (string, error) {
		c := connectGoOver(t, "2025-11-25", func(rec *recorder) mcp.Transport {
			return &recordingTransport{inner: &mcp.CommandTransport{Command: d.command("connect", "example")}, rec: rec}
		})
		res, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "snodod"}})
		switch {
		case err != nil:
			return "", err
		case res.IsError:
			return "", errors.New(resultText(res))
		}
		return resultText(res), nil
	}
	if _, err := greet(); err == nil || !strings.Contains(err.Error(), "needs a login: run snodod login example") {
		t.Errorf("a call before the login: %v", err)
	}

	login := d.command("login", "example")
	var stderr bytes.Buffer
	login.Stderr = &stderr
	out, err := login.Output()
	if err != nil || !strings.HasPrefix(string(out), "example: logged in at http://localhost:") {
		t.Fatalf("snodod login: %v\n%s\n%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "/authorize?") {
		t.Errorf("snodod login did not show the authorization URL:\n%s", stderr.String())
	}
	if got, err := greet(); err != nil || got != "Hello, snodod!" {
		t.Fatalf("after the login: %q %v", got, err)
	}
	file := filepath.Join(d.dir, "state", "snodod", "oauth", "example.json")
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v %v", fi, err)
	}
	var rec struct {
		Token struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		} `json:"token"`
	}
	b, _ := os.ReadFile(file)
	if err := json.Unmarshal(b, &rec); err != nil || rec.Token.AccessToken == "" {
		t.Fatalf("the token file holds no token (%v): %d bytes", err, len(b))
	}
	st := d.statusJSON(t)
	if len(st.Upstreams) != 1 || !strings.HasPrefix(st.Upstreams[0].Auth, "ok (expires in ") || st.Upstreams[0].URL != endpoint {
		t.Errorf("status: %+v", st.Upstreams)
	}
	status, _ := d.command("status").Output()
	printed, _ := d.command("config", "print").Output()
	for what, text := range map[string]string{"status --json": mustJSON(st), "status": string(status), "config print": string(printed), "the daemon's log": d.stderr.String()} {
		for _, secret := range []string{rec.Token.AccessToken, rec.Token.RefreshToken} {
			if secret != "" && strings.Contains(text, secret) {
				t.Errorf("%s shows a token", what)
			}
		}
	}
	if !strings.Contains(string(status), "example: remote "+endpoint+"; auth ok (expires in ") {
		t.Errorf("snodod status:\n%s", status)
	}

	out, err = d.command("logout", "example").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "example: logged out") {
		t.Errorf("snodod logout: %v\n%s", err, out)
	}
	if _, err := greet(); err == nil || !strings.Contains(err.Error(), "snodod login example") {
		t.Errorf("a call after the logout: %v", err)
	}

	// --no-browser: the person opens the URL elsewhere and pastes the
	// redirect the browser ends on.
	paste := d.command("login", "--no-browser", "example")
	stdin, _ := paste.StdinPipe()
	errPipe, _ := paste.StderrPipe()
	var stdout bytes.Buffer
	paste.Stdout = &stdout
	if err := paste.Start(); err != nil {
		t.Fatal(err)
	}
	authURL := ""
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		if u := strings.TrimSpace(sc.Text()); strings.HasPrefix(u, "http") {
			authURL = u
			break
		}
	}
	if authURL == "" {
		t.Fatal("snodod login --no-browser showed no URL")
	}
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()
	redirect := followToLoopback(t, authURL)
	if _, err := io.WriteString(stdin, redirect+"\n"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- paste.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.HasPrefix(stdout.String(), "example: logged in at ") {
			t.Fatalf("snodod login --no-browser: %v\n%s", err, stdout.String())
		}
	case <-time.After(answerWithin):
		_ = paste.Process.Kill()
		t.Fatal("snodod login --no-browser did not end")
	}
	if got, err := greet(); err != nil || got != "Hello, snodod!" {
		t.Errorf("after the pasted login: %q %v", got, err)
	}
}

// followToLoopback follows an authorization URL as a browser on another
// machine would, up to the redirect to the login's loopback listener,
// which it does not visit: it returns that URL, for a person to paste.
func followToLoopback(t *testing.T, u string) string {
	t.Helper()
	var final string
	hc := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Hostname() == "127.0.0.1" {
			final = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := hc.Get(u)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		t.Fatalf("the browser: %v", err)
	}
	resp.Body.Close()
	if final == "" {
		t.Fatalf("the authorization ended on %d, not a redirect to the loopback listener", resp.StatusCode)
	}
	return final
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
