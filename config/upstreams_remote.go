package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
)

// A remote server: an mcpServers entry with url (Windsurf's serverUrl),
// which snodod reaches over HTTP instead of starting (docs/config.md,
// "Remote servers"). Its transport is type "http" (Streamable HTTP, both
// eras; "streamable-http" and "streamableHttp" are the same) or "sse" (the
// HTTP+SSE transport of 2024-11-05).

// Remote is how to reach a remote server. Headers values are secrets:
// nothing in this package prints or logs them.
type Remote struct {
	// URL is the MCP endpoint (the SSE endpoint for SSE), expanded.
	URL string
	// SSE is type = "sse".
	SSE bool
	// Headers are sent with every request to the server, their values
	// expanded (${file:…} included).
	Headers map[string]string
	// TLSCAFile, when set, is a PEM file of certificate authorities
	// trusted besides the system's, absolute.
	TLSCAFile string
	// AllowInsecureHTTP allows http:// to a host other than loopback,
	// for the server and its authorization server.
	AllowInsecureHTTP bool
	// OAuth is how snodod authorizes to the server when it asks.
	OAuth OAuth
}

// OAuth is a remote server's authorization client (docs/oauth.md): a
// pre-registered client (ClientID, with a secret or a private key), a
// client ID metadata document URL, else dynamic registration.
type OAuth struct {
	ClientID string
	// ClientSecretFile and PrivateKeyFile are absolute paths of files
	// holding the client's secret or its private key (PEM), read when the
	// daemon connects; at most one is set.
	ClientSecretFile  string
	PrivateKeyFile    string
	SigningAlg, KeyID string
	ClientMetadataURL string
	// Scopes are requested besides those the server asks for.
	Scopes []string
	// Grant is "authorization_code" (a person logs in: snodod login
	// NAME) or "client_credentials".
	Grant string
	// DPoP asks for sender-constrained tokens.
	DPoP bool
	// RedirectPort is the loopback port of logins; 0 picks a free one.
	RedirectPort int
}

// remoteEntry holds the fields of a remote server as written.
type remoteEntry struct {
	URL               *string     `key:"url,alias=serverUrl"`
	Headers           headerTable `key:"headers"`
	TLSCAFile         *string     `key:"tls_ca_file"`
	AllowInsecureHTTP bool        `key:"allow_insecure_http"`
	OAuth             *oauthEntry `key:"oauth"`
}

// oauthEntry is the oauth table as written.
type oauthEntry struct {
	ClientID          string   `key:"client_id"`
	ClientSecretFile  *string  `key:"client_secret_file"`
	PrivateKeyFile    *string  `key:"private_key_file"`
	SigningAlg        string   `key:"signing_alg,oneof=ES256|ES384|ES512|RS256|PS256|EdDSA"`
	KeyID             string   `key:"key_id"`
	ClientMetadataURL string   `key:"client_metadata_url"`
	Scopes            []string `key:"scopes"`
	Grant             string   `key:"grant,oneof=authorization_code|client_credentials"`
	DPoP              bool     `key:"dpop"`
	RedirectPort      int      `key:"redirect_port"`
}

// remoteTypes are the type values of remote servers' entries.
var remoteTypes = []string{"http", "sse", "streamable-http", "streamableHttp"}

// programFields are the fields of a server snodod starts, which a remote
// server has none of.
var programFields = []string{"command", "args", "env", "env_file", "envFile", "inherit_env", "cwd"}

// RemoteKey returns the key that makes a client's server entry a remote
// server: url, serverUrl, or a remote type ("http", "sse"); "" for a
// local server.
func RemoteKey(fields map[string]any) string {
	for _, k := range []string{"url", "serverUrl"} {
		if _, ok := fields[k]; ok {
			return k
		}
	}
	if t, _ := fields["type"].(string); slices.Contains(remoteTypes, t) {
		return "type"
	}
	return ""
}

// remote provisions and checks a remote server's entry: its URL, headers,
// TLS authorities and authorization; the fields of a program are refused.
func (e *serverEntry) remote(f field, r programRules, fields map[string]any) *Remote {
	for _, k := range programFields {
		if hasKey(fields, k) {
			f.child(k).problem("is a field of a server snodod starts; a remote server (url) has none: remove it, or remove url")
		}
	}
	if e.Share == "cwd" {
		f.child("share").problem(`must be "all" or "session" for a remote server (url): it has no working directory, got "cwd"`)
	}
	rm := &Remote{SSE: e.Type == "sse", AllowInsecureHTTP: e.AllowInsecureHTTP, Headers: map[string]string{}}
	x := &expander{env: r.env, base: r.base, field: "url"}
	if raw, ok := e.urlValue(); ok {
		u, problem := x.expand(raw, 0)
		if problem != "" {
			f.child("url").problem(problem)
		} else if msg := checkServerURL(u, e.AllowInsecureHTTP); msg != "" {
			f.child("url").problem(msg)
		}
		rm.URL = u
	}
	for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
		x.field = "headers"
		v, problem := x.expand(e.Headers[name], allowFile)
		if problem != "" {
			f.child("headers").child(name).problem(problem) // never the value: it is a secret
			continue
		}
		for _, empty := range x.empty {
			f.child("headers").child(name).warn("uses ${file:" + empty + "}, which is empty: write the secret into it")
		}
		x.empty = nil
		rm.Headers[name] = v
	}
	if e.TLSCAFile != nil {
		rm.TLSCAFile = e.filePath(f.child("tls_ca_file"), x, *e.TLSCAFile, r)
		if r.check && rm.TLSCAFile != "" {
			checkPEM(f.child("tls_ca_file"), rm.TLSCAFile, "CERTIFICATE")
		}
	}
	if e.OAuth != nil {
		rm.OAuth = e.OAuth.settle(f.child("oauth"), x, r, e)
	}
	return rm
}

// urlValue is url (or serverUrl) as written.
func (e *serverEntry) urlValue() (string, bool) {
	if e.URL == nil {
		return "", false
	}
	return *e.URL, true
}

// filePath expands and resolves the path of a file field; "" with a
// problem recorded when it cannot.
func (e *serverEntry) filePath(f field, x *expander, p string, r programRules) string {
	x.field = f.key[strings.LastIndexByte(f.key, '.')+1:]
	v, problem := x.expand(p, 0)
	switch {
	case problem != "":
		f.problem(problem)
	case strings.TrimSpace(v) == "":
		f.problem("must be a file's path, got " + literal(p))
	default:
		return resolvePath(v, r.env["HOME"], r.base)
	}
	return ""
}

// settle checks the oauth table and makes its OAuth.
func (o *oauthEntry) settle(f field, x *expander, r programRules, e *serverEntry) OAuth {
	out := OAuth{ClientID: o.ClientID, SigningAlg: o.SigningAlg, KeyID: o.KeyID, ClientMetadataURL: o.ClientMetadataURL,
		Scopes: o.Scopes, Grant: o.Grant, DPoP: o.DPoP, RedirectPort: o.RedirectPort}
	if out.Grant == "" {
		out.Grant = "authorization_code"
	}
	if o.ClientSecretFile != nil {
		out.ClientSecretFile = e.filePath(f.child("client_secret_file"), x, *o.ClientSecretFile, r)
		if r.check && out.ClientSecretFile != "" {
			checkReadable(f.child("client_secret_file"), out.ClientSecretFile)
		}
	}
	if o.PrivateKeyFile != nil {
		out.PrivateKeyFile = e.filePath(f.child("private_key_file"), x, *o.PrivateKeyFile, r)
		if r.check && out.PrivateKeyFile != "" {
			checkPEM(f.child("private_key_file"), out.PrivateKeyFile, "PRIVATE KEY")
		}
	}
	switch {
	case o.ClientSecretFile != nil && o.PrivateKeyFile != nil:
		f.child("private_key_file").problem("is another way of authenticating the client than client_secret_file; keep one of them")
	case (o.ClientSecretFile != nil || o.PrivateKeyFile != nil) && o.ClientID == "":
		f.child("client_id").problem("is required with a client secret or a private key: the client they authenticate")
	case o.Grant == "client_credentials" && (o.ClientID == "" || o.ClientSecretFile == nil && o.PrivateKeyFile == nil):
		f.child("grant").problem(`"client_credentials" needs client_id and client_secret_file or private_key_file: the client authenticates as itself`)
	}
	if (o.SigningAlg != "" || o.KeyID != "") && o.PrivateKeyFile == nil {
		f.child("private_key_file").problem("is required with signing_alg or key_id")
	}
	if o.ClientMetadataURL != "" {
		if u, err := url.Parse(o.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			f.child("client_metadata_url").problem("must be an https URL with a path (the client's metadata document, which is its client_id), got " + literal(o.ClientMetadataURL))
		}
	}
	if o.RedirectPort < 0 || o.RedirectPort > 65535 {
		f.child("redirect_port").problem(fmt.Sprintf("must be a port, 1 to 65535, or 0 for any free one, got %d", o.RedirectPort))
	}
	for _, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\"\\") {
			f.child("scopes").problem("entries must be scope names, without spaces or quotes, got " + quote(s))
		}
	}
	return out
}

// checkServerURL says what is wrong with a remote server's URL: not
// http(s), no host, credentials in it, or plain http beyond loopback
// without allow_insecure_http.
func checkServerURL(s string, insecure bool) string {
	u, err := url.Parse(s)
	switch {
	case strings.TrimSpace(s) == "":
		return "must be the server's URL, such as \"https://example.com/mcp\", got " + literal(s)
	case err != nil || !u.IsAbs() || u.Host == "":
		return "must be an absolute http or https URL, such as \"https://example.com/mcp\", got " + literal(s)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Sprintf("must be an https (or http) URL, got the scheme %q", u.Scheme)
	case u.User != nil:
		return "must not carry a user or password (they would be shown and logged): put credentials in headers, such as headers = { Authorization = \"${file:~/.secrets/token}\" }"
	case u.Fragment != "":
		return "must not have a #fragment, got " + literal(s)
	case u.Scheme == "http" && !insecure && !LoopbackHost(u.Hostname()):
		return fmt.Sprintf("uses http:// to %s, which is not loopback: the traffic (tokens included) would be readable on the way; use https, or set allow_insecure_http = true", u.Hostname())
	}
	return ""
}

// LoopbackHost reports whether host (without port) is this machine:
// localhost (and *.localhost), 127.0.0.0/8 or ::1.
func LoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// checkReadable is config check's look at a secret file: it exists and
// is readable (its content is never shown).
func checkReadable(f field, p string) {
	b, err := os.ReadFile(p)
	switch {
	case err != nil:
		f.problem(fmt.Sprintf("cannot read %s: %v", p, pathErr(err)))
	case strings.TrimSpace(string(b)) == "":
		f.warn(p + " is empty: write the secret into it")
	}
}

// checkPEM is config check's look at a PEM file: it holds a block whose
// type ends with kind ("CERTIFICATE", "PRIVATE KEY").
func checkPEM(f field, p, kind string) {
	b, err := os.ReadFile(p)
	switch {
	case err != nil:
		f.problem(fmt.Sprintf("cannot read %s: %v", p, pathErr(err)))
	case !strings.Contains(string(b), kind+"-----"):
		f.problem(fmt.Sprintf("%s holds no PEM %s", p, strings.ToLower(kind)))
	}
}

// headerTable is the headers field: header names and their values as
// written. Its messages never show a value: headers hold secrets.
type headerTable map[string]string

// reservedHeaders are set by snodod itself on a remote server's requests.
var reservedHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host", "Connection", "Transfer-Encoding",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id", "Dpop"}

func (h *headerTable) decodeEntry(f field, raw any) {
	table, ok := raw.(map[string]any)
	if !ok {
		f.problem(`must be a table of headers, such as { Authorization = "${file:~/.secrets/token}" }, got ` + kindOfValue(raw))
		return
	}
	*h = headerTable{}
	for _, name := range slices.Sorted(maps.Keys(table)) {
		v := f.child(name)
		s, ok := table[name].(string)
		canonical := canonicalHeader(name)
		switch {
		case !headerToken(name):
			v.problem("is not a header name: use letters, digits and -")
		case slices.Contains(reservedHeaders, canonical) || strings.HasPrefix(canonical, "Mcp-Param-"):
			v.problem("is set by snodod itself on every request; remove it")
		case !ok:
			v.problem("must be a string, got " + kindOfValue(table[name]))
		case strings.ContainsAny(s, "\r\n\x00"):
			v.problem("must be one line: a header value holds no line break")
		default:
			(*h)[name] = s
		}
	}
}

// headerToken reports whether s is a header field name (RFC 9110 §5.1:
// a token).
func headerToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// canonicalHeader is name as net/http writes it: "mcp-session-id" is
// "Mcp-Session-Id".
func canonicalHeader(name string) string {
	parts := strings.Split(strings.ToLower(name), "-")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "-")
}
