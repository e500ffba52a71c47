package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Record is one line of the audit log (docs/observability.md, "Audit
// log"), as written and as snodod audit reads it back.
type Record struct {
	// Time is when the request ended, UTC, RFC 3339 with milliseconds.
	Time    time.Time `json:"time"`
	Session uint64    `json:"session"`
	// Peer is the client's process: uid, pid and executable for the
	// session socket, the uid alone for an HTTP client on loopback or a
	// Unix socket; absent when unknown (an HTTP client on the network).
	Peer   *Peer   `json:"peer,omitempty"`
	Client *Client `json:"client,omitempty"`
	// View is the session's view: "" for the aggregated one, else the
	// server passed through.
	View string `json:"view"`
	// Server owns the item: the hosted server a relayed request went
	// to, "" for snodod's own.
	Server string `json:"server"`
	Method string `json:"method"`
	// Tool, URI and Prompt: the one the method names.
	Tool   string `json:"tool,omitempty"`
	URI    string `json:"uri,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	// ArgsDigest is "sha256:" and the hex SHA-256 of the canonical JSON
	// of the arguments (tools/call, prompts/get).
	ArgsDigest string `json:"args_digest,omitempty"`
	// Arguments are the arguments, redacted; only with audit.arguments.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Outcome is "ok", "error" (Code is then the JSON-RPC code),
	// "cancelled" or "timed_out".
	Outcome    string  `json:"outcome"`
	Code       int64   `json:"code,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// Peer is the process at the other end of the session.
type Peer struct {
	UID int `json:"uid"`
	// PID and Exe are absent for an HTTP client and for a session an
	// upgrade resumed.
	PID int    `json:"pid,omitempty"`
	Exe string `json:"exe,omitempty"`
}

// Client is the clientInfo the client sent.
type Client struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// TimeFormat is the records' time: RFC 3339, milliseconds, UTC.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes the time with TimeFormat.
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	return json.Marshal(struct {
		Time string `json:"time"`
		plain
	}{r.Time.UTC().Format(TimeFormat), plain(r)})
}

// Digest is "sha256:" and the hex SHA-256 of raw's canonical JSON
// (canonical): what args_digest holds. Absent arguments (nil raw) are
// digested as {}.
func Digest(raw json.RawMessage) (string, error) {
	var v any = map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var err error
		if v, err = decode(raw); err != nil {
			return "", err
		}
	}
	b, err := canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// decode parses raw keeping numbers as written.
func decode(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canonical is v's canonical JSON: object keys sorted (by their UTF-8
// bytes), no white space, strings escaped as encoding/json does without
// its HTML escapes, numbers as the client wrote them.
func canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Redacted is the redaction's mark.
const Redacted = "[redacted]"

// secretKeyParts are what a key that holds a secret contains (lower
// case, - and . read as _).
var secretKeyParts = []string{"token", "password", "passwd", "passphrase", "secret", "authorization", "api_key", "apikey", "access_key", "private_key", "credential", "cookie"}

// secretKeys are the keys that hold a secret by their whole name.
var secretKeys = []string{"auth", "pass", "pw", "pwd", "pin", "key", "otp", "bearer"}

// SecretKey reports whether an argument key names a secret: its value
// is redacted whole (docs/observability.md, "Audit log").
func SecretKey(k string) bool {
	k = strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(k))
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	for _, w := range secretKeys {
		if k == w {
			return true
		}
	}
	return false
}

// redact returns v with the values of secret keys replaced by Redacted
// and every occurrence of a secret in a string replaced by it.
func redact(v any, secrets []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if SecretKey(k) {
				x[k] = Redacted
			} else {
				x[k] = redact(val, secrets)
			}
		}
	case []any:
		for i := range x {
			x[i] = redact(x[i], secrets)
		}
	case string:
		return redactString(x, secrets)
	}
	return v
}

// redactString replaces every secret in s by Redacted; secrets are
// longest first.
func redactString(s string, secrets []string) string {
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}
