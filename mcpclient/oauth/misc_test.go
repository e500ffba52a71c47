package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseChallenges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Challenge
	}{
		{`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="files:read files:write"`,
			[]Challenge{{Scheme: "Bearer", Params: map[string]string{"resource_metadata": "https://x/.well-known/oauth-protected-resource", "scope": "files:read files:write"}}}},
		{`Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="u", error_description="needs \"write\""`,
			[]Challenge{{Scheme: "Bearer", Params: map[string]string{"error": "insufficient_scope", "scope": "mcp:write", "resource_metadata": "u", "error_description": `needs "write"`}}}},
		{`DPoP error="use_dpop_nonce", Bearer realm="r"`,
			[]Challenge{{Scheme: "DPoP", Params: map[string]string{"error": "use_dpop_nonce"}}, {Scheme: "Bearer", Params: map[string]string{"realm": "r"}}}},
		{`Basic realm="a", Bearer`,
			[]Challenge{{Scheme: "Basic", Params: map[string]string{"realm": "a"}}, {Scheme: "Bearer", Params: map[string]string{}}}},
		{`Negotiate abc123==, Bearer scope=x`,
			[]Challenge{{Scheme: "Negotiate", Params: map[string]string{}, Token68: "abc123=="}, {Scheme: "Bearer", Params: map[string]string{"scope": "x"}}}},
		{`Bearer  Scope = "a"  Error="b"`, // sloppy: spaces, no comma, case
			[]Challenge{{Scheme: "Bearer", Params: map[string]string{"scope": "a", "error": "b"}}}},
		{`Bearer scope="unterminated`, []Challenge{{Scheme: "Bearer", Params: map[string]string{"scope": "unterminated"}}}},
		{``, nil},
		{`, ,`, nil},
	} {
		h := http.Header{}
		if c.in != "" {
			h.Set("WWW-Authenticate", c.in)
		}
		got := ParseChallenges(h)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.in, got, c.want)
		}
	}
	h := http.Header{}
	h.Add("WWW-Authenticate", `Basic realm="x"`)
	h.Add("WWW-Authenticate", `bearer scope="s"`)
	ch := findChallenge(ParseChallenges(h), "DPoP", "Bearer")
	if ch == nil || strings.Join(ch.Scope(), ",") != "s" {
		t.Errorf("two header fields: %+v", ch)
	}
	var none *Challenge
	if none.ResourceMetadata() != "" || none.Scope() != nil || none.Error() != "" {
		t.Error("a nil challenge has parameters")
	}
}

// FuzzParseChallenges: any header value parses without panicking or
// looping.
func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{`Bearer a="b", c=d`, `x y==, z`, `"`, `Bearer ,,, a=`, `a b=c=d`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { parseChallenges(s) })
}

// TestJWTSignatures: what signJWT produces verifies with the standard
// library, for every key type.
func TestJWTSignatures(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		key crypto.Signer
		alg string
	}{{ec, "ES256"}, {ec384, "ES384"}, {rk, "RS256"}, {rk, "PS256"}, {ed, "EdDSA"}} {
		jws, err := signJWT(c.key, c.alg, map[string]any{"typ": "JWT"}, map[string]any{"iss": "me"})
		if err != nil {
			t.Fatal(c.alg, err)
		}
		parts := strings.Split(jws, ".")
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		input := []byte(parts[0] + "." + parts[1])
		var ok bool
		switch k := c.key.Public().(type) {
		case *ecdsa.PublicKey:
			h := jwsHash[c.alg].hash.New()
			h.Write(input)
			n := len(sig) / 2
			ok = ecdsa.Verify(k, h.Sum(nil), bigInt(sig[:n]), bigInt(sig[n:]))
		case *rsa.PublicKey:
			sum := sha256.Sum256(input)
			if c.alg == "PS256" {
				ok = rsa.VerifyPSS(k, crypto.SHA256, sum[:], sig, nil) == nil
			} else {
				ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil
			}
		case ed25519.PublicKey:
			ok = ed25519.Verify(k, input, sig)
		}
		if !ok {
			t.Errorf("%s: the signature does not verify", c.alg)
		}
		if err := checkAlg(c.key, c.alg); err != nil {
			t.Errorf("%s: %v", c.alg, err)
		}
	}
	if err := checkAlg(ec, "RS256"); err == nil {
		t.Error("an EC key accepted RS256")
	}
}

// TestParsePrivateKey reads the three PEM forms.
func TestParsePrivateKey(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(ec)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	for name, data := range map[string][]byte{
		"PKCS #8": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		"SEC 1":   append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...),
		"PKCS #1": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}),
	} {
		if _, err := ParsePrivateKey(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParsePrivateKey([]byte("not pem")); err == nil {
		t.Error("garbage accepted")
	}
}

// TestResponseLimit: a metadata document of exactly the limit is read,
// one byte more is refused with an error naming the limit.
func TestResponseLimit(t *testing.T) {
	const limit = 4096
	doc := `{"resource":"%s","authorization_servers":["https://as.example.com"],"resource_name":"`
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	defer srv.Close()
	a, _ := New(Config{ServerURL: srv.URL + "/mcp", MaxResponseBytes: limit, Logger: quiet})
	defer a.Close()
	head := fmt.Sprintf(doc, srv.URL+"/mcp")
	pad := func(n int) string { return head + strings.Repeat("x", n-len(head)-2) + `"}` }
	body = pad(limit)
	if _, err := a.fetchResourceMetadata(t.Context(), nil); err != nil {
		t.Fatalf("exactly the limit: %v", err)
	}
	body = pad(limit + 1)
	_, err := a.fetchResourceMetadata(t.Context(), nil)
	if !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "larger than 4096 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
}

// TestLegacyDiscovery: a server with no protected resource metadata (the
// 2025-03-26 revision) has its authorization server at its origin.
func TestLegacyDiscovery(t *testing.T) {
	as := newFakeAS(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if g, ok := as.lookup(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")); !ok || g.resource == "" {
			w.WriteHeader(401)
			return
		}
		fmt.Fprint(w, "{}")
	})
	mux.Handle("/", as.srv.Config.Handler) // the authorization server, on the same origin
	srv := httptest.NewServer(mux)
	defer srv.Close()
	as.srv.URL = srv.URL // its issuer is the MCP server's origin
	a, _ := New(Config{ServerURL: srv.URL + "/mcp", Interact: browser, Logger: quiet})
	defer a.Close()
	resp, err := (&http.Client{Transport: a.Transport(nil)}).Post(srv.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || as.authRequests[0].Get("resource") != srv.URL+"/mcp" {
		t.Errorf("status %d, resource %q", resp.StatusCode, as.authRequests[0].Get("resource"))
	}
}

// TestOpenBrowser: $BROWSER is a colon-separated list of commands, each
// given the URL last or in place of %s; without it and without a display
// there is no browser.
func TestOpenBrowser(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	script := filepath.Join(dir, "b")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" > "+out+".tmp && mv "+out+".tmp "+out+"\n"), 0o755)
	for _, c := range []struct{ browser, want string }{
		{script, "https://as/x?a=1"},
		{script + " --new-tab %s --flag", "--new-tab https://as/x?a=1 --flag"},
		{filepath.Join(dir, "missing") + ":" + script, "https://as/x?a=1"},
	} {
		os.Remove(out)
		t.Setenv("BROWSER", c.browser)
		if err := OpenBrowser(t.Context(), "https://as/x?a=1"); err != nil {
			t.Fatal(err)
		}
		var got []byte
		for range 500 {
			if got, _ = os.ReadFile(out); got != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if strings.TrimSpace(string(got)) != c.want {
			t.Errorf("BROWSER=%q ran with %q", c.browser, got)
		}
	}
	t.Setenv("BROWSER", "")
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	if err := OpenBrowser(t.Context(), "https://as/x"); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("without a display: %v", err)
	}
}

func bigInt(b []byte) *big.Int { return new(big.Int).SetBytes(b) }

// TestRequestTimeout: an authorization server that never answers fails
// the discovery after RequestTimeout, with an error saying where.
func TestRequestTimeout(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	a, _ := New(Config{ServerURL: srv.URL + "/mcp", RequestTimeout: 50 * time.Millisecond, Logger: quiet})
	defer a.Close()
	_, err := a.fetchResourceMetadata(t.Context(), nil)
	if !errors.Is(err, ErrDiscovery) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.URL+"/.well-known/oauth-protected-resource/mcp") {
		t.Fatalf("err %v", err)
	}
}
