package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// dpopAlg is the algorithm of DPoP proofs: ES256 is the one RFC 9449
// servers must support in practice and the one MCP's extension names.
const dpopAlg = "ES256"

// dpopKey signs DPoP proofs (RFC 9449 §4) with one P-256 key. The key is
// stored with the tokens bound to it (record.DPoPKey).
type dpopKey struct {
	key *ecdsa.PrivateKey
	jwk map[string]any
	jkt string // the key's thumbprint, the dpop_jkt of authorization requests (§10)
}

func newDPoPKey() (*dpopKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return wrapDPoPKey(k), nil
}

func parseDPoPKey(der []byte) (*dpopKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("the stored DPoP key is not a P-256 key")
	}
	return wrapDPoPKey(ek), nil
}

func wrapDPoPKey(k *ecdsa.PrivateKey) *dpopKey {
	jwk := publicJWK(&k.PublicKey)
	return &dpopKey{key: k, jwk: jwk, jkt: jwkThumbprint(jwk)}
}

func (k *dpopKey) der() []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(k.key)
	return der
}

// proof is a fresh DPoP proof for a method+target request: a new jti
// each time, htu without query and fragment (§4.2), the server's nonce
// when it gave one (§8, §9), and ath, the hash of the access token, when
// the request carries one (§7).
func (k *dpopKey) proof(method, target, accessToken, nonce string, now time.Time) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	claims := map[string]any{
		"jti": randomString(16),
		"htm": method,
		"htu": u.String(),
		"iat": now.Unix(),
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = b64(sum[:])
	}
	return signJWT(k.key, dpopAlg, map[string]any{"typ": "dpop+jwt", "jwk": k.jwk}, claims)
}

// origin is the scheme://host of a URL: DPoP nonces are kept per server.
func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// noteNonce keeps the DPoP-Nonce a response carries (RFC 9449 §8, §9:
// any response may give a new one) for the next proof to that server.
func (a *Authorizer) noteNonce(resp *http.Response) {
	n := resp.Header.Get("DPoP-Nonce")
	if n == "" || resp.Request == nil || resp.Request.URL == nil {
		return
	}
	a.mu.Lock()
	a.nonces[origin(resp.Request.URL)] = n
	a.mu.Unlock()
}

// nonceFor is the last nonce the server at u gave.
func (a *Authorizer) nonceFor(u *url.URL) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nonces[origin(u)]
}

// dpop returns the authorizer's DPoP key, creating it (and storing it with
// the record) on first use. Called with a.mu held.
func (a *Authorizer) dpopLocked() (*dpopKey, error) {
	if a.dpopKey != nil {
		return a.dpopKey, nil
	}
	if len(a.rec.DPoPKey) > 0 {
		k, err := parseDPoPKey(a.rec.DPoPKey)
		if err == nil {
			a.dpopKey = k
			return k, nil
		}
	}
	k, err := newDPoPKey()
	if err != nil {
		return nil, err
	}
	a.dpopKey = k
	a.rec.DPoPKey = k.der()
	return k, nil
}

// isDPoP reports whether a token is DPoP-bound (RFC 9449 §5: the token
// endpoint says token_type DPoP).
func (t *token) isDPoP() bool { return t != nil && strings.EqualFold(t.TokenType, "DPoP") }
