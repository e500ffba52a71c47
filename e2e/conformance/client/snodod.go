package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// viaSnodod does the scenario through snodod, as a person's client would
// once the server is in snodod's configuration: a daemon of its own (its
// XDG directories in a temporary one) hosting serverURL as the remote
// server "conformance", configured with what the suite's context gives
// (a pre-registered client, its secret or key in a file, the client
// credentials grant for those scenarios, the client ID metadata document
// URL), and the official Go SDK's client (2025-11-25) through `snodod
// connect conformance`. The client declares URL-mode elicitation, so a
// login is asked of it (docs/upstreams.md §9): it opens the URL in the
// test "browser" and accepts.
func viaSnodod(ctx context.Context, bin, scenario, serverURL string, cc conformanceContext) error {
	dir, err := os.MkdirTemp("", "scc") // short: the socket's path must fit
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := isolatedEnv(dir)
	for _, d := range []string{"run", filepath.Join("config", "snodod"), "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	conf, err := snododConfig(dir, scenario, serverURL, cc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "snodod", "config.toml"), []byte(conf), 0o600); err != nil {
		return err
	}
	serve := exec.Command(bin, "serve")
	serve.Env, serve.Stderr = env, os.Stderr
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = serve.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = serve.Process.Kill()
			<-done
		}
	}()
	control := filepath.Join(dir, "run", "snodod", "control.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(control); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("snodod serve did not listen within 20s")
		}
	}
	// Started before the client connects, as a daemon's servers usually
	// are by the time a client comes: the client's first list then has
	// the server's catalog, however slowly this machine starts it. A
	// server that needs a login fails this start; the client's first
	// request then asks for the login.
	start := exec.CommandContext(ctx, bin, "upstream", "start", "conformance")
	start.Env, start.Stdout, start.Stderr = env, os.Stderr, os.Stderr
	_ = start.Run()
	client := mcp.NewClient(&mcp.Implementation{Name: "snodod-conformance-client", Version: "1.0.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode == "url" {
				// The login snodod asks for: the browser goes, the
				// answer is at once (the login completes out of band).
				go browse(req.Params.URL)
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			raw, _ := json.Marshal(req.Params)
			ans, _ := answerServer("elicitation/create", raw)
			content, _ := ans.(map[string]any)["content"].(map[string]any)
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
	})
	connect := exec.Command(bin, "connect", "conformance")
	connect.Env, connect.Stderr = env, os.Stderr
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: connect}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("snodod connect: %w", err)
	}
	defer cs.Close()
	return play(ctx, scenario, &sdkSession{cs: cs}, cc)
}

// snododConfig is snodod's configuration for the scenario: the remote
// server, and its oauth table from the suite's context.
func snododConfig(dir, scenario, serverURL string, cc conformanceContext) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcpServers.conformance]\nurl = %q\n\n[mcpServers.conformance.oauth]\nclient_metadata_url = %q\n", serverURL, clientMetadataURL)
	if cc.ClientID != "" {
		fmt.Fprintf(&b, "client_id = %q\n", cc.ClientID)
	}
	if cc.ClientSecret != "" {
		file := filepath.Join(dir, "client-secret")
		if err := os.WriteFile(file, []byte(cc.ClientSecret), 0o600); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "client_secret_file = %q\n", file)
	}
	if cc.PrivateKeyPEM != "" {
		file := filepath.Join(dir, "client-key.pem")
		if err := os.WriteFile(file, []byte(cc.PrivateKeyPEM), 0o600); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "private_key_file = %q\n", file)
		if cc.SigningAlgorithm != "" {
			fmt.Fprintf(&b, "signing_alg = %q\n", cc.SigningAlgorithm)
		}
	}
	if strings.HasPrefix(scenario, "auth/client-credentials") {
		b.WriteString("grant = \"client_credentials\"\n")
	}
	return b.String(), nil
}

// isolatedEnv is the environment with snodod's directories in dir and
// nothing of another daemon's (its sockets, systemd's variables).
func isolatedEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "SNODOD_"), strings.HasPrefix(name, "LISTEN_"), strings.HasPrefix(name, "XDG_"),
			name == "NOTIFY_SOCKET", name == "WATCHDOG_USEC", name == "WATCHDOG_PID":
		default:
			env = append(env, kv)
		}
	}
	return append(env,
		"XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"))
}

// sdkSession is a session through the Go SDK's client.
type sdkSession struct{ cs *mcp.ClientSession }

func (s *sdkSession) call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	str := func(k string) string { v, _ := params[k].(string); return v }
	var res any
	var err error
	switch method {
	case "tools/call":
		res, err = s.cs.CallTool(ctx, &mcp.CallToolParams{Name: str("name"), Arguments: params["arguments"]})
	case "tools/list":
		res, err = s.cs.ListTools(ctx, nil)
	case "resources/list":
		res, err = s.cs.ListResources(ctx, nil)
	case "prompts/list":
		res, err = s.cs.ListPrompts(ctx, nil)
	case "resources/read":
		res, err = s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: str("uri")})
	case "prompts/get":
		args := map[string]string{}
		if m, ok := params["arguments"].(map[string]any); ok {
			for k, v := range m {
				args[k] = fmt.Sprint(v)
			}
		}
		res, err = s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: str("name"), Arguments: args})
	default:
		return nil, fmt.Errorf("method %s is not played through snodod", method)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (s *sdkSession) listTools(ctx context.Context) ([]tool, error) {
	if init := s.cs.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Tools == nil {
		return nil, nil // the server declared no tools: a client does not list them
	}
	res, err := s.call(ctx, "tools/list", nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Tools []tool `json:"tools"`
	}
	err = json.Unmarshal(res, &list)
	return list.Tools, err
}

func (s *sdkSession) list(ctx context.Context, method, key string) ([]map[string]any, error) {
	res, err := s.call(ctx, method, nil)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, err
	}
	var items []map[string]any
	err = json.Unmarshal(m[key], &items)
	if err != nil {
		log.Printf("%s: %v", method, err)
	}
	return items, err
}
