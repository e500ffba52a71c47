package server

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// relayState signs the requestState of a relayed input_required round: the
// relay handler's own state (opaque bytes, such as the other server's own
// requestState and which server it came from) travels in base64url before
// a token bound, like the runtime's own states, to the method, the params
// digest and a 10-minute expiry. A label of its own keeps a relayed state
// from ever opening as a runtime state, and the other way round.
func (s *signer) relayState(method string, params json.RawMessage, state []byte, now time.Time) string {
	expiry := uint64(now.Add(stateLifetime).UnixMilli())
	carried := base64.RawURLEncoding.EncodeToString(state)
	return carried + "." + encodeToken(expiry, s.relayMAC(expiry, method, params, state))
}

// openRelayState verifies a relayed requestState and returns the state it
// carries.
func (s *signer) openRelayState(tok, method string, params json.RawMessage, now time.Time) ([]byte, bool) {
	dot := strings.LastIndexByte(tok, '.')
	if dot < 0 {
		return nil, false
	}
	state, err := base64.RawURLEncoding.DecodeString(tok[:dot])
	if err != nil || base64.RawURLEncoding.EncodeToString(state) != tok[:dot] {
		return nil, false
	}
	expiry, sum, ok := decodeToken(tok[dot+1:], stateMACBytes)
	if !ok || int64(expiry) < now.UnixMilli() || !hmac.Equal(sum, s.relayMAC(expiry, method, params, state)) {
		return nil, false
	}
	if state == nil {
		state = []byte{}
	}
	return state, true
}

func (s *signer) relayMAC(expiry uint64, method string, params json.RawMessage, state []byte) []byte {
	digest := paramsDigest(params)
	m := s.mac("snodod relay requestState v1")
	writeUint(m, expiry)
	writeField(m, []byte(method))
	writeField(m, digest[:])
	writeField(m, state)
	return m.Sum(nil)[:stateMACBytes]
}
