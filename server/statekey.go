package server

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
)

// MinStateKeyBytes is the shortest key Options.StateKey accepts: the
// signer's HMAC-SHA256 needs 256 bits to be as strong as it can be.
const MinStateKeyBytes = 32

// This file lets a server sign with a key it is given rather than a
// random one: several processes behind one load balancer then accept one
// another's requestState and cursors (docs/protocol.md §12.3, §10.1), so an
// MRTR retry may land on any node.

// LoadStateKey reads the key file of server.state_key_file: its content
// with surrounding whitespace trimmed (a key written by `openssl rand
// -base64 48 > key` ends in a newline), at least MinStateKeyBytes long.
func LoadStateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server.state_key_file: %w", err)
	}
	key := bytes.TrimSpace(b)
	if len(key) < MinStateKeyBytes {
		return nil, fmt.Errorf("server.state_key_file %s: the key must be at least %d bytes, got %d; make one with: head -c 48 /dev/urandom | base64 > %s",
			path, MinStateKeyBytes, len(key), path)
	}
	return key, nil
}

var errStateKeyShort = fmt.Errorf("state key must be at least %d bytes", MinStateKeyBytes)

// checkStateKey validates Options.StateKey: absent, or long enough.
func checkStateKey(key []byte) error {
	if len(key) != 0 && len(key) < MinStateKeyBytes {
		return errStateKeyShort
	}
	return nil
}

// signerFor returns the signer of key (its SHA-256, so any length
// serves), or a random one when key is empty.
func signerFor(key []byte) *signer {
	if len(key) == 0 {
		return newSigner()
	}
	return &signer{key: sha256.Sum256(key), origin: newOrigin()}
}
