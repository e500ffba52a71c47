package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// ParsePrivateKey reads the first private key of a PEM file: PKCS #8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY").
// The key signs private_key_jwt client assertions (RFC 7523).
func ParsePrivateKey(pemData []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			return nil, errors.New("oauth: no PEM private key found")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("oauth: reading the %s: %w", block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("oauth: a %T cannot sign", key)
		}
		if _, err := defaultAlg(signer); err != nil {
			return nil, err
		}
		return signer, nil
	}
}

// defaultAlg is the JWS algorithm (RFC 7518) a key signs with when none
// is configured.
func defaultAlg(key crypto.Signer) (string, error) {
	switch k := key.Public().(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ES256", nil
		case elliptic.P384():
			return "ES384", nil
		case elliptic.P521():
			return "ES512", nil
		}
		return "", fmt.Errorf("oauth: the EC curve %s has no JWS algorithm", k.Curve.Params().Name)
	case *rsa.PublicKey:
		return "RS256", nil
	case ed25519.PublicKey:
		return "EdDSA", nil
	}
	return "", fmt.Errorf("oauth: a %T key cannot sign a JWT", key.Public())
}

// jwsHash is the hash of each supported algorithm, and whether it is RSA
// PSS; EdDSA signs the message itself.
var jwsHash = map[string]struct {
	hash crypto.Hash
	pss  bool
}{
	"ES256": {crypto.SHA256, false}, "ES384": {crypto.SHA384, false}, "ES512": {crypto.SHA512, false},
	"RS256": {crypto.SHA256, false}, "RS384": {crypto.SHA384, false}, "RS512": {crypto.SHA512, false},
	"PS256": {crypto.SHA256, true}, "PS384": {crypto.SHA384, true}, "PS512": {crypto.SHA512, true},
	"EdDSA": {0, false},
}

// checkAlg reports whether key can sign with alg.
func checkAlg(key crypto.Signer, alg string) error {
	h, ok := jwsHash[alg]
	if !ok {
		return fmt.Errorf("oauth: unsupported JWS algorithm %q", alg)
	}
	switch key.Public().(type) {
	case *ecdsa.PublicKey:
		want, _ := defaultAlg(key)
		if alg != want {
			return fmt.Errorf("oauth: this EC key signs %s, not %s", want, alg)
		}
	case *rsa.PublicKey:
		if h.hash == 0 || alg[0] != 'R' && alg[0] != 'P' {
			return fmt.Errorf("oauth: an RSA key cannot sign %s", alg)
		}
	case ed25519.PublicKey:
		if alg != "EdDSA" {
			return fmt.Errorf("oauth: an Ed25519 key signs EdDSA, not %s", alg)
		}
	}
	return nil
}

// signJWT returns the compact JWS of claims under header (to which alg is
// added), signed by key.
func signJWT(key crypto.Signer, alg string, header, claims map[string]any) (string, error) {
	h, ok := jwsHash[alg]
	if !ok {
		return "", fmt.Errorf("oauth: unsupported JWS algorithm %q", alg)
	}
	header["alg"] = alg
	hb, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := b64(hb) + "." + b64(cb)
	var sig []byte
	switch {
	case h.hash == 0:
		sig, err = key.Sign(rand.Reader, []byte(input), crypto.Hash(0))
	default:
		d := h.hash.New()
		d.Write([]byte(input))
		var opts crypto.SignerOpts = h.hash
		if h.pss {
			opts = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: h.hash}
		}
		sig, err = key.Sign(rand.Reader, d.Sum(nil), opts)
		if err == nil {
			if pub, ok := key.Public().(*ecdsa.PublicKey); ok {
				sig, err = rawECDSA(sig, pub)
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("oauth: signing a JWT: %w", err)
	}
	return input + "." + b64(sig), nil
}

// rawECDSA turns an ASN.1 ECDSA signature into the fixed-size R || S a JWS
// carries (RFC 7518 §3.4).
func rawECDSA(der []byte, pub *ecdsa.PublicKey) ([]byte, error) {
	var rs struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(der, &rs); err != nil {
		return nil, err
	}
	size := (pub.Curve.Params().BitSize + 7) / 8
	out := make([]byte, 2*size)
	rs.R.FillBytes(out[:size])
	rs.S.FillBytes(out[size:])
	return out, nil
}

// publicJWK is the public JWK of an EC P-256 key, with its members in the
// order of RFC 7638 so that its JSON is the thumbprint input.
func publicJWK(pub *ecdsa.PublicKey) map[string]any {
	ecdh, _ := pub.ECDH()
	raw := ecdh.Bytes() // 0x04 || X || Y
	size := (len(raw) - 1) / 2
	return map[string]any{
		"crv": "P-256",
		"kty": "EC",
		"x":   b64(raw[1 : 1+size]),
		"y":   b64(raw[1+size:]),
	}
}

// jwkThumbprint is the SHA-256 JWK thumbprint (RFC 7638) of an EC key:
// base64url of the hash of its required members in lexicographic order.
func jwkThumbprint(jwk map[string]any) string {
	// encoding/json sorts map keys, which is RFC 7638's order.
	data, _ := json.Marshal(map[string]any{"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"], "y": jwk["y"]})
	sum := sha256.Sum256(data)
	return b64(sum[:])
}

// b64 is unpadded base64url.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// randomString is n random bytes as unpadded base64url.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b64(b)
}
