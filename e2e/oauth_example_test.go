package e2e_test

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/mcpclient/oauth"
)

// tsOAuthExample starts the TypeScript SDK's example server with its demo
// OAuth provider (simpleStreamableHttp.js --oauth --oauth-strict: an
// authorization server on a second port, accepting only tokens issued for
// this server's resource), both on loopback (e2e/node/loopback.mjs: the
// example listens on every interface otherwise), and returns the MCP
// endpoint's URL, as the example names it (localhost).
func tsOAuthExample(t *testing.T) string {
	t.Helper()
	node, dir := nodeClient(t)
	example := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "simpleStreamableHttp.js")
	mcpPort, authPort := freePort(t), freePort(t)
	cmd := exec.Command(node, "--import", filepath.Join(dir, "loopback.mjs"), example, "--oauth", "--oauth-strict")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_PORT="+mcpPort, "MCP_AUTH_PORT="+authPort)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the example server's output:\n%s", out.String())
		}
	})
	for _, port := range []string{mcpPort, authPort} {
		if !eventually.Within(30*time.Second, func() bool {
			c, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				c.Close()
			}
			return err == nil
		}) {
			t.Fatalf("the example server does not listen on %s:\n%s", port, out.String())
		}
	}
	return "http://localhost:" + mcpPort + "/mcp"
}

// TestOAuthTypeScriptExample: the official Go SDK client, its HTTP
// requests going through mcpclient/oauth's transport, reaches the
// TypeScript SDK's example server behind its demo OAuth provider: the
// login (dynamic registration, PKCE, the resource the strict server
// checks) completes headless through $BROWSER; the token file is private
// and survives a restart without a new login; a logout forgets it.
func TestOAuthTypeScriptExample(t *testing.T) {
	endpoint := tsOAuthExample(t)
	t.Setenv("BROWSER", conformanceClient(t)+" browse")
	store, err := oauth.OpenStore(filepath.Join(t.TempDir(), "oauth"))
	if err != nil {
		t.Fatal(err)
	}
	// authorizer is the server's Authorizer in a new process; interactive:
	// it may log in through $BROWSER.
	authorizer := func(interactive bool) *oauth.Authorizer {
		cfg := oauth.Config{Name: "example", ServerURL: endpoint, Store: store}
		if interactive {
			cfg.Interact = oauth.OpenBrowser
		}
		a, err := oauth.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	greet := func(a *oauth.Authorizer) error {
		client := mcp.NewClient(&mcp.Implementation{Name: "snodod-e2e-oauth", Version: "1"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
			Endpoint:   endpoint,
			HTTPClient: &http.Client{Transport: a.Transport(nil)},
		}, nil)
		if err != nil {
			return err
		}
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "snodod"}})
		if err != nil {
			return err
		}
		if text := res.Content[0].(*mcp.TextContent).Text; text != "Hello, snodod!" {
			t.Errorf("greet: %q", text)
		}
		return nil
	}

	first := authorizer(true)
	if err := greet(first); err != nil {
		t.Fatalf("first session: %v", err)
	}
	st := first.Status()
	if st.State != oauth.StateOK || !strings.HasPrefix(st.String(), "ok (expires in ") || !strings.HasPrefix(st.Issuer, "http://localhost:") {
		t.Errorf("status %q %+v", st, st)
	}
	fi, err := os.Stat(store.Path("example"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}

	// A restart: the stored token serves, no login (this one cannot).
	if err := greet(authorizer(false)); err != nil {
		t.Fatalf("after a restart: %v", err)
	}

	// The demo provider offers no revocation: the logout forgets.
	revoked, err := first.Logout(t.Context())
	if err != nil || revoked {
		t.Errorf("logout: revoked %v, err %v", revoked, err)
	}
	err = greet(authorizer(false))
	if err == nil || !strings.Contains(err.Error(), "login required") {
		t.Errorf("after the logout: %v", err)
	}
	var oe *oauth.Error
	if err != nil && errors.As(err, &oe) && !errors.Is(err, oauth.ErrLoginRequired) {
		t.Errorf("after the logout: %v is not ErrLoginRequired", err)
	}
}
