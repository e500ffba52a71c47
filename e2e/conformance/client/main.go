// Command client is a TEST-ONLY MCP client for the official conformance
// suite's client scenarios (e2e TestClientConformance): mcpclient/oauth
// for the authorization, and a minimal Streamable HTTP MCP client
// (mcp.go) for the rest; or, with $SNODOD_CONFORMANCE_VIA naming snodod's
// binary, snodod itself: a daemon of its own hosting the URL as a remote
// upstream, and the official Go SDK's client doing the scenario through
// `snodod connect` (snodod.go).
//
//	client URL         run $MCP_CONFORMANCE_SCENARIO against the server at
//	                   URL, with $MCP_CONFORMANCE_CONTEXT (pre-registered
//	                   credentials, tool calls); logins open $BROWSER
//	client browse URL  the test "browser" $BROWSER names: follow URL and
//	                   its redirects as a person's browser would
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/snodod/snodod/mcpclient/oauth"
)

// conformanceContext is $MCP_CONFORMANCE_CONTEXT.
type conformanceContext struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	ToolCalls        []struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"toolCalls"`
}

// clientMetadataURL is the client ID metadata document URL the suite's
// CIMD scenario expects.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

func main() {
	log.SetFlags(0)
	log.SetPrefix("client: ")
	if len(os.Args) == 3 && os.Args[1] == "browse" {
		os.Exit(browse(os.Args[2]))
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: client URL (with MCP_CONFORMANCE_SCENARIO set) | client browse URL")
		os.Exit(2)
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var cc conformanceContext
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		if err := json.Unmarshal([]byte(s), &cc); err != nil {
			log.Fatalf("MCP_CONFORMANCE_CONTEXT: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	do := run
	if bin := os.Getenv("SNODOD_CONFORMANCE_VIA"); bin != "" {
		do = func(ctx context.Context, scenario, serverURL string, cc conformanceContext) error {
			return viaSnodod(ctx, bin, scenario, serverURL, cc)
		}
	}
	if err := do(ctx, scenario, os.Args[1], cc); err != nil {
		log.Printf("scenario %s: %v", scenario, err)
		os.Exit(1)
	}
}

// authorizer is the OAuth side of the client, configured as a user of
// snodod would configure a remote server: the pre-registered client the
// suite gives (with the client credentials grant for those scenarios), a
// client ID metadata document URL, else dynamic registration; logins
// through $BROWSER. DPoP is not configured: the servers that want it say
// so.
func authorizer(scenario, serverURL string, cc conformanceContext) (*oauth.Authorizer, error) {
	cfg := oauth.Config{
		Name:              "conformance",
		ServerURL:         serverURL,
		ClientID:          cc.ClientID,
		ClientSecret:      cc.ClientSecret,
		ClientMetadataURL: clientMetadataURL,
		ClientName:        "snodod conformance client",
		Interact:          oauth.OpenBrowser,
		LoginTimeout:      20 * time.Second,
	}
	if strings.HasPrefix(scenario, "auth/client-credentials") {
		cfg.Grant = oauth.GrantClientCredentials
	}
	if cc.PrivateKeyPEM != "" {
		key, err := oauth.ParsePrivateKey([]byte(cc.PrivateKeyPEM))
		if err != nil {
			return nil, err
		}
		cfg.PrivateKey, cfg.SigningAlg = key, cc.SigningAlgorithm
	}
	return oauth.New(cfg)
}

func run(ctx context.Context, scenario, serverURL string, cc conformanceContext) error {
	authz, err := authorizer(scenario, serverURL, cc)
	if err != nil {
		return err
	}
	defer authz.Close()
	c := &mcpClient{
		url:    serverURL,
		http:   &http.Client{Transport: authz.Transport(nil)},
		caps:   map[string]any{"elicitation": map[string]any{}},
		handle: answerServer,
	}
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.close()
	return play(ctx, scenario, c, cc)
}

// session is what a scenario does its requests through: the minimal
// HTTP client (mcp.go), or the Go SDK's client through snodod connect
// (snodod.go).
type session interface {
	// call sends a request and returns its result (an isError tools/call
	// result is a result); a JSON-RPC error is an error.
	call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error)
	// listTools lists the tools a client may call.
	listTools(ctx context.Context) ([]tool, error)
	// list calls a list method and returns its items under key.
	list(ctx context.Context, method, key string) ([]map[string]any, error)
}

// play does what scenario asks of a client, through c.
func play(ctx context.Context, scenario string, c session, cc conformanceContext) error {
	callTool := func(name string, args map[string]any) error {
		if args == nil {
			args = map[string]any{}
		}
		_, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
		return err
	}
	switch scenario {
	case "initialize", "request-metadata", "json-schema-ref-no-deref":
		_, err := c.listTools(ctx)
		return err
	case "tools_call":
		if _, err := c.listTools(ctx); err != nil {
			return err
		}
		return callTool("add_numbers", map[string]any{"a": 5, "b": 3})
	case "elicitation-sep1034-client-defaults":
		if _, err := c.listTools(ctx); err != nil {
			return err
		}
		return callTool("test_client_elicitation_defaults", nil)
	case "sse-retry":
		if _, err := c.listTools(ctx); err != nil {
			return err
		}
		return callTool("test_reconnection", nil)
	case "json-schema-2020-12-preservation":
		tools, err := c.listTools(ctx)
		if err != nil {
			return err
		}
		for _, t := range tools {
			if t.Name == "json_schema_2020_12_tool" {
				return callTool("json_schema_echo", map[string]any{"schema": t.InputSchema})
			}
		}
		return errors.New("no json_schema_2020_12_tool")
	case "sep-2322-client-request-state":
		for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
			if err := callTool(name, nil); err != nil {
				log.Printf("%s: %v", name, err)
			}
		}
		return nil
	case "http-standard-headers":
		if tools, err := c.listTools(ctx); err == nil && len(tools) > 0 {
			_ = callTool(tools[0].Name, nil)
		}
		if res, err := c.list(ctx, "resources/list", "resources"); err == nil && len(res) > 0 {
			_, _ = c.call(ctx, "resources/read", map[string]any{"uri": res[0]["uri"]})
		}
		if prompts, err := c.list(ctx, "prompts/list", "prompts"); err == nil && len(prompts) > 0 {
			_, _ = c.call(ctx, "prompts/get", map[string]any{"name": prompts[0]["name"], "arguments": map[string]any{}})
		}
		return nil
	case "http-custom-headers":
		if _, err := c.listTools(ctx); err != nil {
			return err
		}
		for _, tc := range cc.ToolCalls {
			if err := callTool(tc.Name, tc.Arguments); err != nil {
				log.Printf("%s: %v", tc.Name, err)
			}
		}
		return nil
	case "http-invalid-tool-headers":
		tools, err := c.listTools(ctx)
		if err != nil {
			return err
		}
		for _, t := range tools {
			if err := callTool(t.Name, map[string]any{"region": "us-west1"}); err != nil {
				log.Printf("%s: %v", t.Name, err)
			}
		}
		return nil
	}
	// The authorization scenarios: list the tools, call the test tool.
	if _, err := c.listTools(ctx); err != nil {
		return err
	}
	return callTool("test-tool", nil)
}

// answerServer answers the server's requests (on a stream, or as 2026
// input requests): an elicitation is accepted with the schema's defaults
// (SEP-1034), a sampling request gets a fixed text, roots are none.
func answerServer(method string, params json.RawMessage) (any, error) {
	switch method {
	case "elicitation/create":
		var p struct {
			RequestedSchema struct {
				Properties map[string]struct {
					Default any `json:"default"`
				} `json:"properties"`
			} `json:"requestedSchema"`
		}
		_ = json.Unmarshal(params, &p)
		content := map[string]any{}
		for name, prop := range p.RequestedSchema.Properties {
			if prop.Default != nil {
				content[name] = prop.Default
			}
		}
		return map[string]any{"action": "accept", "content": content}, nil
	case "sampling/createMessage":
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "ok"}, "model": "conformance"}, nil
	case "roots/list":
		return map[string]any{"roots": []any{}}, nil
	case "ping":
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("method %s is not handled", method)
}

// browse follows u and its redirects, keeping cookies, as a person's
// browser does with an authorization URL; it ends at the client's
// loopback redirect. The URLs it visits hold codes: it prints none.
func browse(u string) int {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 15 * time.Second}
	resp, err := hc.Get(u)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL may hold a code
		}
		log.Printf("browse: %v", err)
		return 1
	}
	resp.Body.Close()
	final := *resp.Request.URL
	final.RawQuery = ""
	log.Printf("browse: %d at %s", resp.StatusCode, final.String())
	if resp.StatusCode >= 300 {
		return 1
	}
	return 0
}
