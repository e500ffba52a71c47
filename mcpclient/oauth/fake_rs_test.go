package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeRS is a protected MCP endpoint at /mcp, with its protected resource
// metadata at the path-aware well-known URL, accepting the tokens of its
// authorization servers for its resource.
type fakeRS struct {
	srv *httptest.Server

	mu           sync.Mutex
	as           *fakeAS
	prmPath      string   // default "/.well-known/oauth-protected-resource/mcp"
	inHeader     bool     // resource_metadata in the challenge (default true)
	challenge    []string // scope in the 401 challenge
	prmScopes    []string
	resource     string // overrides the metadata's resource
	need         map[string][]string
	rejectAll    bool // no token is good enough
	dpop         bool // challenge with DPoP and require proofs
	rsNonce      bool // require the RS nonce
	requests     int
	authorized   int
	unauthorized int
	seen         []string // the Authorization headers
	proofs       []string // the DPoP proofs
}

func newFakeRS(t *testing.T, as *fakeAS) *fakeRS {
	rs := &fakeRS{as: as, prmPath: "/.well-known/oauth-protected-resource/mcp", inHeader: true, need: map[string][]string{}}
	rs.srv = httptest.NewServer(http.HandlerFunc(rs.serve))
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *fakeRS) url() string { return rs.srv.URL + "/mcp" }

func (rs *fakeRS) prmURL() string { return rs.srv.URL + rs.prmPath }

func (rs *fakeRS) serve(w http.ResponseWriter, r *http.Request) {
	rs.mu.Lock()
	as, prmPath := rs.as, rs.prmPath
	rs.mu.Unlock()
	res := rs.url()
	if prmPath == "/.well-known/oauth-protected-resource" {
		res = rs.srv.URL // the metadata of the whole origin
	}
	if r.URL.Path == prmPath {
		if rs.resource != "" {
			res = rs.resource
		}
		m := map[string]any{"resource": res, "authorization_servers": []string{as.issuer()}}
		if rs.prmScopes != nil {
			m["scopes_supported"] = rs.prmScopes
		}
		writeJSON(w, 200, m)
		return
	}
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return
	}
	rs.mu.Lock()
	rs.requests++
	rs.seen = append(rs.seen, r.Header.Get("Authorization"))
	if p := r.Header.Get("DPoP"); p != "" {
		rs.proofs = append(rs.proofs, p)
	}
	rs.mu.Unlock()
	scheme, access, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	g, ok := as.lookup(access)
	if ok && g.jkt != "" {
		// A bound token: the DPoP scheme and a proof by its key.
		jkt, claims, valid := checkProof(r.Header.Get("DPoP"), r.Method, rs.url(), access)
		ok = valid && strings.EqualFold(scheme, "DPoP") && jkt == g.jkt
		if ok && rs.rsNonce && claims["nonce"] != "rs-nonce" {
			w.Header().Set("DPoP-Nonce", "rs-nonce")
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
			w.WriteHeader(401)
			return
		}
	} else if ok && !strings.EqualFold(scheme, "Bearer") {
		ok = false
	}
	if !ok || g.resource != res || rs.rejectAll {
		rs.mu.Lock()
		rs.unauthorized++
		rs.mu.Unlock()
		rs.challengeWith(w, 401, "", rs.challenge)
		return
	}
	if want := rs.need[r.Header.Get("X-Op")]; !hasScopes(g.scopes, want) {
		rs.challengeWith(w, 403, "insufficient_scope", want)
		return
	}
	rs.mu.Lock()
	rs.authorized++
	rs.mu.Unlock()
	fmt.Fprint(w, `{"ok":true}`)
}

func (rs *fakeRS) challengeWith(w http.ResponseWriter, status int, errCode string, scopes []string) {
	scheme := "Bearer"
	if rs.dpop {
		scheme = "DPoP"
	}
	var params []string
	if errCode != "" {
		params = append(params, `error="`+errCode+`"`)
	}
	if len(scopes) > 0 {
		params = append(params, `scope="`+joinScopes(scopes)+`"`)
	}
	if rs.inHeader {
		params = append(params, `resource_metadata="`+rs.prmURL()+`"`)
	}
	w.Header().Set("WWW-Authenticate", strings.TrimSpace(scheme+" "+strings.Join(params, ", ")))
	w.WriteHeader(status)
	fmt.Fprint(w, `{"error":"unauthorized"}`)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// checkProof verifies a DPoP proof (RFC 9449 §4.3) for method and target
// (and, with access, its ath), returning its key's thumbprint and claims.
func checkProof(proof, method, target, access string) (string, map[string]any, bool) {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return "", nil, false
	}
	var header struct {
		Typ string         `json:"typ"`
		Alg string         `json:"alg"`
		JWK map[string]any `json:"jwk"`
	}
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if json.Unmarshal(hb, &header) != nil || header.Typ != "dpop+jwt" || header.Alg != "ES256" || header.JWK["d"] != nil {
		return "", nil, false
	}
	x, _ := base64.RawURLEncoding.DecodeString(fmt.Sprint(header.JWK["x"]))
	y, _ := base64.RawURLEncoding.DecodeString(fmt.Sprint(header.JWK["y"]))
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return "", nil, false
	}
	var claims map[string]any
	if !verifyES256(proof, pub, &claims) {
		return "", nil, false
	}
	if claims["htm"] != method || claims["htu"] != target || claims["jti"] == nil || claims["iat"] == nil {
		return "", nil, false
	}
	if access != "" {
		sum := sha256.Sum256([]byte(access))
		if claims["ath"] != base64.RawURLEncoding.EncodeToString(sum[:]) {
			return "", nil, false
		}
	}
	return jwkThumbprint(header.JWK), claims, true
}

// verifyES256 checks a compact JWS signed with ES256 by pub and decodes
// its claims.
func verifyES256(jws string, pub *ecdsa.PublicKey, claims *map[string]any) bool {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || pub == nil {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return false
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	return json.Unmarshal(cb, claims) == nil
}

// browser follows an authorization URL as a person's browser would: each
// redirect, to the loopback listener in the end.
func browser(_ context.Context, u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// has reports whether the recorded values include v.
func has(vs []string, v string) bool { return slices.Contains(vs, v) }
