package config

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
)

// mcp-remote (npm) is the bridge that stdio-only clients run to reach a
// remote server: `npx -y mcp-remote URL [PORT] [--header "K: V"] …`. Each
// client runs its own and repeats the login; snodod reaches the server
// itself, once, so an entry that runs mcp-remote is read as the url entry
// it stands for (docs/config.md, "Remote servers").

// mcpRemoteFlags are mcp-remote's flags that take a value; the others it
// has (--allow-http, --debug, --silent, --enable-proxy) take none.
var mcpRemoteFlags = map[string]bool{
	"--header": true, "--transport": true, "--host": true, "--resource": true, "--auth-timeout": true,
	"--static-oauth-client-metadata": true, "--static-oauth-client-info": true, "--ignore-tool": true,
}

// mcpRemoteArgs returns the arguments given to mcp-remote when the entry
// runs it (npx, bunx or pnpx with or without -y, pnpm or yarn dlx, or an
// installed mcp-remote), or ok false.
func mcpRemoteArgs(fields map[string]any) (args []string, ok bool) {
	command, _ := fields["command"].(string)
	raw, _ := fields["args"].([]any)
	list := make([]string, 0, len(raw))
	for _, a := range raw {
		s, isText := a.(string)
		if !isText {
			s = strings.TrimSpace(strings.Trim(strings.TrimSpace(jsonText(a)), `"`))
		}
		list = append(list, s)
	}
	isMCPRemote := func(s string) bool {
		return s == "mcp-remote" || strings.HasPrefix(s, "mcp-remote@")
	}
	switch base := filepath.Base(command); base {
	case "mcp-remote":
		return list, true
	case "npx", "bunx", "pnpx", "pnpm", "yarn":
		i := 0
		if base == "pnpm" || base == "yarn" {
			if len(list) == 0 || list[0] != "dlx" {
				return nil, false
			}
			i = 1
		}
		for ; i < len(list); i++ {
			switch a := list[i]; {
			case a == "-y" || a == "--yes" || a == "--quiet" || a == "-q":
			case isMCPRemote(a):
				return list[i+1:], true
			default:
				return nil, false
			}
		}
	}
	return nil, false
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mapMCPRemote turns an entry that runs mcp-remote into the url entry it
// stands for: url, type from --transport, headers from --header (with
// mcp-remote's ${VAR}, from the entry's env when it sets VAR, else left
// for snodod's ${VAR}), oauth.redirect_port from the port, allow_insecure_http
// from --allow-http, tls_ca_file from NODE_EXTRA_CA_CERTS, tools.exclude
// from --ignore-tool, oauth.client_id and oauth.client_secret (a value
// snodod import moves to a file) from --static-oauth-client-info, and
// oauth.scopes from --static-oauth-client-metadata's scope. The other
// flags have no use in snodod (--host: its logins listen on 127.0.0.1;
// --enable-proxy: HTTPS_PROXY is always honoured; --debug, --silent,
// --auth-timeout, --resource). skip says why an entry cannot be read.
func mapMCPRemote(fields map[string]any, args []string) (mapped map[string]any, skip string) {
	env, _ := fields["env"].(map[string]any)
	subst := func(s string) string {
		for name, v := range env {
			if text, ok := v.(string); ok {
				s = strings.ReplaceAll(s, "${"+name+"}", text)
			}
		}
		return s
	}
	mapped = map[string]any{}
	for _, k := range []string{"disabled", "enabled", "timeout", "alwaysAllow", "autoApprove"} {
		if v, ok := fields[k]; ok {
			mapped[k] = v
		}
	}
	headers := map[string]any{}
	oauth := map[string]any{}
	var exclude []any
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, value, inline := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") {
			flag, inline = a, false
		}
		if mcpRemoteFlags[flag] && !inline {
			if i+1 >= len(args) {
				return nil, "runs mcp-remote with " + flag + " and no value after it"
			}
			i++
			value = args[i]
		}
		switch {
		case !strings.HasPrefix(a, "-") && mapped["url"] == nil:
			mapped["url"] = a
		case !strings.HasPrefix(a, "-"):
			if port, err := strconv.Atoi(a); err == nil && port > 0 && port < 65536 {
				oauth["redirect_port"] = float64(port)
			}
		case flag == "--header":
			name, v, ok := strings.Cut(value, ":")
			if !ok || strings.TrimSpace(name) == "" {
				return nil, "runs mcp-remote with --header " + quote(value) + ", which is not NAME: VALUE"
			}
			headers[strings.TrimSpace(name)] = subst(strings.TrimSpace(v))
		case flag == "--transport":
			switch value {
			case "sse-only":
				mapped["type"] = "sse"
			case "http-only", "http-first", "sse-first":
				// snodod tries Streamable HTTP first and falls back to
				// HTTP+SSE when the server refuses it.
			default:
				return nil, "runs mcp-remote with --transport " + quote(value) + ", which is not http-first, sse-first, http-only or sse-only"
			}
		case flag == "--allow-http":
			mapped["allow_insecure_http"] = true
		case flag == "--ignore-tool":
			exclude = append(exclude, value)
		case flag == "--static-oauth-client-info":
			var info struct {
				ClientID     string `json:"client_id"`
				ClientSecret string `json:"client_secret"`
			}
			if json.Unmarshal([]byte(subst(value)), &info) != nil || info.ClientID == "" {
				return nil, "runs mcp-remote with --static-oauth-client-info that is not a JSON object with a client_id"
			}
			oauth["client_id"] = info.ClientID
			if info.ClientSecret != "" {
				oauth["client_secret"] = info.ClientSecret
			}
		case flag == "--static-oauth-client-metadata":
			var meta struct {
				Scope string `json:"scope"`
			}
			if json.Unmarshal([]byte(subst(value)), &meta) == nil && meta.Scope != "" {
				var scopes []any
				for _, s := range strings.Fields(meta.Scope) {
					scopes = append(scopes, s)
				}
				oauth["scopes"] = scopes
			}
		}
	}
	if mapped["url"] == nil {
		return nil, "runs mcp-remote without the server's URL"
	}
	mapped["url"] = subst(mapped["url"].(string))
	if len(headers) > 0 {
		mapped["headers"] = headers
	}
	if len(oauth) > 0 {
		mapped["oauth"] = oauth
	}
	if len(exclude) > 0 {
		mapped["tools"] = map[string]any{"exclude": exclude}
	}
	if ca, ok := env["NODE_EXTRA_CA_CERTS"].(string); ok && ca != "" {
		mapped["tls_ca_file"] = ca
	}
	return mapped, ""
}

// MCPRemoteSecret reports whether a mapped entry holds a client secret
// that came from mcp-remote's command line (oauth.client_secret): snodod
// import moves it into a file; an entry read at every load cannot.
func MCPRemoteSecret(mapped map[string]any) bool {
	o, _ := mapped["oauth"].(map[string]any)
	_, ok := o["client_secret"]
	return ok
}
