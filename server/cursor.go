package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/snodod/snodod/protocol"
)

// This file holds the signer of the tokens snodod hands to clients and
// must recognise later without keeping state: pagination cursors
// (docs/protocol.md §10.1) and MRTR request states (§12.3). Both are base64url
// (no padding) of a small payload followed by a truncated HMAC-SHA256 over
// a label, the payload and what the token is bound to. The key is random
// per process unless server.state_key_file gives every node the same one,
// so a token from another process (or before a restart) is refused unless
// the processes share the key.

// signer signs and checks cursors and request states. It is immutable and
// safe for concurrent use.
type signer struct {
	key [32]byte
	// origin tells this process's cursors from those of another process
	// with the same key (see listRev).
	origin uint64
}

// newSigner returns a signer with a fresh random key.
func newSigner() *signer {
	s := &signer{origin: newOrigin()}
	rand.Read(s.key[:]) // never fails (crypto/rand, Go 1.24+)
	return s
}

func newOrigin() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// listRev is what a cursor is bound to besides its list and version: the
// catalog revision (a count of this process's catalog changes) and a
// fingerprint of the list's keys in order. A cursor issued by this process
// is valid while the revision is the same, so any catalog change refuses
// it; one issued by another process sharing the key (a node behind the
// same load balancer, docs/scale-out.md, or this daemon before a restart)
// cannot know this revision, and is valid while the list's keys are the
// same, so the offset it carries means the same items.
type listRev struct {
	revision    uint64
	fingerprint uint64
}

const (
	stateLifetime  = 10 * time.Minute // docs/protocol.md §12.3
	stateMACBytes  = 28               // 8 + 28 = 36 bytes: 48 characters, no partial group
	cursorMACBytes = 16               // offset, origin, revision: 24 + 16 = 40 bytes, 54 characters
)

var tokenEncoding = base64.RawURLEncoding

// mac starts an HMAC for a token with label, so a token of one kind is
// never valid as another.
func (s *signer) mac(label string) hash.Hash {
	m := hmac.New(sha256.New, s.key[:])
	writeField(m, []byte(label))
	return m
}

// writeField writes b length-prefixed, so adjacent fields cannot be
// confused ("ab"+"c" differs from "a"+"bc").
func writeField(h hash.Hash, b []byte) {
	h.Write(binary.AppendUvarint(nil, uint64(len(b))))
	h.Write(b)
}

func writeUint(h hash.Hash, v uint64) { h.Write(binary.BigEndian.AppendUint64(nil, v)) }

// decodeToken decodes token into a payload of 8 bytes and a MAC of macBytes.
// Only the exact encoding snodod produces is accepted: no padding, no
// line breaks, no stray trailing bits.
func decodeToken(token string, macBytes int) (payload uint64, sum []byte, ok bool) {
	b, err := tokenEncoding.DecodeString(token)
	if err != nil || len(b) != 8+macBytes || tokenEncoding.EncodeToString(b) != token {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(b), b[8:], true
}

func encodeToken(payload uint64, sum []byte) string {
	return tokenEncoding.EncodeToString(append(binary.BigEndian.AppendUint64(nil, payload), sum...))
}

// stateWith signs a requestState that also carries the answers given so far
// (a JSON object), so a later round need not repeat them: snodod keeps no
// state between rounds, the client carries it (docs/protocol.md §12.1). The
// answers travel in base64url before the signed token, and the MAC covers
// them.
func (s *signer) stateWith(method string, params json.RawMessage, answers map[string]json.RawMessage, now time.Time) string {
	expiry := uint64(now.Add(stateLifetime).UnixMilli())
	var carried []byte
	if len(answers) > 0 {
		carried, _ = json.Marshal(answers) // map keys sorted: deterministic
	}
	tok := encodeToken(expiry, s.stateMAC(expiry, method, paramsDigest(params), carried))
	if carried == nil {
		return tok
	}
	return base64.RawURLEncoding.EncodeToString(carried) + "." + tok
}

// openState verifies a requestState and returns the answers it carries.
func (s *signer) openState(state, method string, params json.RawMessage, now time.Time) (map[string]json.RawMessage, bool) {
	var carried []byte
	if dot := strings.LastIndexByte(state, '.'); dot >= 0 {
		var err error
		if carried, err = base64.RawURLEncoding.DecodeString(state[:dot]); err != nil || len(carried) == 0 ||
			base64.RawURLEncoding.EncodeToString(carried) != state[:dot] {
			return nil, false
		}
		state = state[dot+1:]
	}
	expiry, sum, ok := decodeToken(state, stateMACBytes)
	if !ok || int64(expiry) < now.UnixMilli() || !hmac.Equal(sum, s.stateMAC(expiry, method, paramsDigest(params), carried)) {
		return nil, false
	}
	var answers map[string]json.RawMessage
	if carried != nil && json.Unmarshal(carried, &answers) != nil {
		return nil, false
	}
	return answers, true
}

func (s *signer) stateMAC(expiry uint64, method string, digest [sha256.Size]byte, carried []byte) []byte {
	m := s.mac("snodod requestState v1")
	writeUint(m, expiry)
	writeField(m, []byte(method))
	writeField(m, digest[:])
	writeField(m, carried)
	return m.Sum(nil)[:stateMACBytes]
}

func paramsDigest(params json.RawMessage) [sha256.Size]byte {
	params = bytes.TrimSpace(params)
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if params[0] != '{' {
		return sha256.Sum256(params)
	}
	d := json.NewDecoder(bytes.NewReader(params))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return sha256.Sum256(params)
	}
	delete(m, "inputResponses")
	delete(m, "requestState")
	delete(m, "_meta")
	canonical, err := json.Marshal(m) // map keys are written sorted
	if err != nil {
		return sha256.Sum256(params)
	}
	return sha256.Sum256(canonical)
}

// cursor returns the nextCursor of a page of the list method: the offset of
// the next page, bound to the protocol version, the list's revision (see
// listRev) and the page size. It is never empty.
func (s *signer) cursor(method, version string, rev listRev, pageSize, offset int) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(offset))
	b = binary.BigEndian.AppendUint64(b, s.origin)
	b = binary.BigEndian.AppendUint64(b, rev.revision)
	return tokenEncoding.EncodeToString(append(b, s.cursorMAC(method, version, s.origin, rev.revision, rev.fingerprint, pageSize, uint64(offset))...))
}

// parseCursor reads a cursor as the client sent it (any JSON value). It
// reports false for anything but a string issued by cursor, here or by a
// process sharing the key, with the same method, version and page size
// and a list revision still valid (listRev): a non-string (null included:
// the caller treats only an absent cursor as the first page), "", a
// forged or modified string, or one that predates a catalog change. The
// answer is then -32602 "Invalid pagination cursor".
func (s *signer) parseCursor(cursor json.RawMessage, method, version string, rev listRev, pageSize int) (offset int, ok bool) {
	token, ok := protocol.String(cursor)
	if !ok {
		return 0, false
	}
	b, err := tokenEncoding.DecodeString(token)
	if err != nil || len(b) != 24+cursorMACBytes || tokenEncoding.EncodeToString(b) != token {
		return 0, false
	}
	off := binary.BigEndian.Uint64(b)
	origin, revision := binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:])
	if off > math.MaxInt || origin == s.origin && revision != rev.revision ||
		!hmac.Equal(b[24:], s.cursorMAC(method, version, origin, revision, rev.fingerprint, pageSize, off)) {
		return 0, false
	}
	return int(off), true
}

func (s *signer) cursorMAC(method, version string, origin, revision, fingerprint uint64, pageSize int, offset uint64) []byte {
	m := s.mac("snodod cursor v2")
	writeField(m, []byte(method))
	writeField(m, []byte(version))
	writeUint(m, origin)
	writeUint(m, revision)
	writeUint(m, fingerprint)
	writeUint(m, uint64(pageSize))
	writeUint(m, offset)
	return m.Sum(nil)[:cursorMACBytes]
}

// fingerprint hashes the keys of a sorted list, in order (FNV-1a, each key
// length-prefixed): the same keys give the same fingerprint in every
// process.
func fingerprint[T any](items []T, key func(T) string) uint64 {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	for _, it := range items {
		k := key(it)
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write([]byte(k))
	}
	return h.Sum64()
}

// page returns the page of items starting at offset with at most size
// items, the offset of the next page, and whether one follows. An offset
// past the end gives an empty last page.
func page[T any](items []T, offset, size int) (out []T, next int, more bool) {
	offset = min(max(offset, 0), len(items))
	end := offset + min(max(size, 0), len(items)-offset)
	return items[offset:end:end], end, end < len(items)
}
