package config

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// MinSecretBytes is the shortest key server.state_key_file and token
// http.auth_token_file may hold: 32 bytes, as package server requires of a
// state key (server.MinStateKeyBytes; a test keeps the two equal).
const MinSecretBytes = 32

// checkSecretFiles reads the files of server.state_key_file and
// http.auth_token_file, as serve does, and refuses one that is missing or
// holds fewer than MinSecretBytes (white space around it trimmed), with
// how to make one. The content is never shown.
func checkSecretFiles(c *Config, ok map[string]bool, src map[string]Source) []Problem {
	var problems []Problem
	for _, s := range []struct{ key, path, what string }{
		{"server.state_key_file", c.Server.StateKeyFile, "key"},
		{"http.auth_token_file", c.HTTP.AuthTokenFile, "token"},
		{"admin.auth_token_file", c.Admin.AuthTokenFile, "token"},
	} {
		if !ok[s.key] || s.path == "" {
			continue
		}
		hint := "make one with: head -c 48 /dev/urandom | base64 > " + s.path
		msg := ""
		b, err := os.ReadFile(s.path)
		if n := len(strings.TrimSpace(string(b))); err != nil {
			msg = fmt.Sprintf("cannot read %s: %v; %s", s.path, pathErr(err), hint)
		} else if n < MinSecretBytes {
			msg = fmt.Sprintf("the %s in %s must be at least %d bytes, got %d; %s", s.what, s.path, MinSecretBytes, n, hint)
		}
		if msg != "" {
			problems = append(problems, Problem{Key: s.key, Source: src[s.key], Message: msg})
		}
	}
	return problems
}

// SecretLooking reports whether the environment variable name, set to
// value, looks like it holds a secret (docs/config.md, "Secrets"): the
// rule by which `snodod import` puts a value in a file of its own rather
// than in the configuration, and `snodod config print` shows a value
// written in the file as <set>. Only value's literal text counts: the
// expansions in it (${file:…}, ${VAR}) are references, not secrets.
//
// A value is secret-looking when it has literal text and its name says
// so (it contains TOKEN, SECRET, PASSW, PASSPHRASE, KEY, AUTH,
// CREDENTIAL, COOKIE, SESSION or PRIVATE, or has a part PASS, PW, PAT,
// CRED, CREDS, DSN or SIG between _), or when the text looks like a
// credential whatever the name: a known token prefix (ghp_, github_pat_,
// glpat-, sk-, xoxb-, AKIA, AIza, eyJ…), a URL with a password
// (scheme://user:password@host), or 20 or more characters without spaces
// or / that mix letters and digits.
func SecretLooking(name, value string) bool {
	text := literalText(value)
	if strings.TrimSpace(text) == "" {
		return false
	}
	upper := strings.ToUpper(name)
	for _, s := range []string{"TOKEN", "SECRET", "PASSW", "PASSPHRASE", "KEY", "AUTH", "CREDENTIAL", "COOKIE", "SESSION", "PRIVATE"} {
		if strings.Contains(upper, s) {
			return true
		}
	}
	for _, part := range strings.FieldsFunc(upper, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		switch part {
		case "PASS", "PW", "PAT", "CRED", "CREDS", "DSN", "SIG":
			return true
		}
	}
	return credentialText(text)
}

// tokenPrefixes start the tokens of common services.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "xoxb-", "xoxp-", "xoxa-", "xapp-", "AKIA", "ASIA", "AIza", "eyJ", "npm_", "pypi-", "hf_"}

// passwordURL matches a URL that carries a password.
var passwordURL = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@`)

func credentialText(s string) bool {
	for _, w := range strings.Fields(s) {
		for _, p := range tokenPrefixes {
			if strings.HasPrefix(w, p) && len(w) > len(p)+8 {
				return true
			}
		}
		if passwordURL.MatchString(w) {
			return true
		}
		if len(w) >= 20 && !strings.Contains(w, "/") && strings.ContainsAny(w, "0123456789") &&
			strings.IndexFunc(w, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }) >= 0 {
			return true
		}
	}
	return false
}

// literalText is s without its ${…} expansions ($$ is a literal $).
func literalText(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i+1 >= len(s) {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
		case '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			s = s[i+end+1:]
		default:
			b.WriteByte('$')
			s = s[i+1:]
		}
	}
}

// MinRedactedBytes is the shortest secret value SecretValues returns: a
// shorter one would be found in too much that is not it.
const MinRedactedBytes = 6

// SecretValues returns the values of the secrets c holds, for the audit
// log to redact wherever they appear (docs/observability.md, "Audit
// log"): the contents of server.state_key_file, http.auth_token_file and
// admin.auth_token_file (trimmed; a file that cannot be read is skipped),
// the environment values of hosted servers and exec tools that
// SecretLooking judges secret, and every header value of a remote
// server (with, for "Scheme credentials", the credentials alone). Values
// shorter than MinRedactedBytes are left out. The slice is new, without
// duplicates, longest first (so that a value containing another is
// redacted whole).
func (c *Config) SecretValues() []string {
	seen := map[string]bool{}
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) >= MinRedactedBytes {
			seen[v] = true
		}
	}
	for _, path := range []string{c.Server.StateKeyFile, c.HTTP.AuthTokenFile, c.Admin.AuthTokenFile} {
		if path == "" {
			continue
		}
		if b, err := os.ReadFile(path); err == nil {
			add(string(b))
		}
	}
	env := func(m map[string]string) {
		for k, v := range m {
			if SecretLooking(k, v) {
				add(v)
			}
		}
	}
	for _, u := range c.MCPServers {
		env(u.Env)
		if u.Remote != nil {
			for _, v := range u.Remote.Headers {
				add(v)
				if _, cred, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
					add(cred)
				}
			}
		}
	}
	for _, t := range c.Tools {
		env(t.Program.Env)
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return out
}
