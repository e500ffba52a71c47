package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Store keeps the OAuth state of each server in a directory the caller
// owns (snodod's state directory): one file per server, NAME.json, mode
// 0600 in a directory of mode 0700, holding its tokens, the client
// registrations it obtained (by authorization server issuer) and its DPoP
// key. Files are replaced atomically (a temporary file written, synced and
// renamed over the old one, the directory synced), so a reader, in this
// process or another, sees the old state or the new one, never a mix; a
// refresh takes an advisory lock on NAME.lock so that two processes using
// one server never refresh one rotating refresh token twice.
//
// A Store is safe for concurrent use. Its files hold secrets: nothing in
// this package logs their contents, and the error messages it returns name
// files, never what they hold.
type Store struct {
	dir string
}

// OpenStore returns the store in dir, creating the directory (mode 0700)
// when it does not exist. An existing directory keeps its mode.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("oauth: the token store needs a directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("oauth: token store: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is the file that holds the state of the server called name.
func (s *Store) Path(name string) string { return filepath.Join(s.dir, name+".json") }

// Remove forgets everything stored for the server called name: tokens,
// registrations, DPoP key. Removing what does not exist is not an error.
func (s *Store) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := os.Remove(s.Path(name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("oauth: removing %s: %w", s.Path(name), err)
	}
	return nil
}

// checkName refuses a server name that is not a plain file name: the
// token file's name is made from it.
func checkName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || len(name) > 200 {
		return fmt.Errorf("oauth: %q is not a usable server name for the token store", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '@') {
			return fmt.Errorf("oauth: server name %q has %q, which the token store does not put in a file name", name, c)
		}
	}
	return nil
}

// record is what is stored for one server. Version 1.
type record struct {
	Version   int    `json:"version"`
	ServerURL string `json:"server_url"`
	// Clients are the registrations obtained by dynamic client
	// registration, by issuer: a client belongs to the authorization
	// server that issued it and is never shown to another.
	Clients map[string]*registration `json:"clients,omitempty"`
	Token   *token                   `json:"token,omitempty"`
	// Scopes is the scope set last requested: a step-up asks for these
	// plus the challenged ones.
	Scopes []string `json:"scopes,omitempty"`
	// ResourceMetadataURL is the resource_metadata URL the server's last
	// challenge named, for discoveries without a challenge.
	ResourceMetadataURL string `json:"resource_metadata_url,omitempty"`
	// DPoPKey is the PKCS #8 DER of the key DPoP proofs are signed with,
	// base64: a DPoP-bound token is only usable with it.
	DPoPKey []byte `json:"dpop_key,omitempty"`
}

// registration is a client identity issued by one authorization server.
type registration struct {
	ClientID         string    `json:"client_id"`
	ClientSecret     string    `json:"client_secret,omitempty"`
	SecretExpiresAt  time.Time `json:"client_secret_expires_at,omitzero"`
	AuthMethod       string    `json:"token_endpoint_auth_method,omitempty"`
	RedirectURI      string    `json:"redirect_uri,omitempty"`
	RegisteredAt     time.Time `json:"registered_at,omitzero"`
	RegistrationURI  string    `json:"registration_client_uri,omitempty"`
	RegistrationAuth string    `json:"registration_access_token,omitempty"`
}

// token is an access token with what it was issued for.
type token struct {
	Issuer       string    `json:"issuer"`
	Resource     string    `json:"resource"`
	ClientID     string    `json:"client_id"`
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	IssuedAt     time.Time `json:"issued_at"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Scope is the granted scope, the requested one when the
	// authorization server did not say.
	Scope []string `json:"scope,omitempty"`
}

// stamp identifies a version of a record file, to notice that another
// process replaced it.
type stamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// load reads the record of name; a missing file is an empty record.
func (s *Store) load(name string) (*record, stamp, error) {
	p := s.Path(name)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &record{Version: 1}, stamp{}, nil
	}
	if err != nil {
		return nil, stamp{}, fmt.Errorf("oauth: reading %s: %w", p, err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		// Say where, not what: the file holds secrets.
		return nil, stamp{}, fmt.Errorf("oauth: %s is not a token file this version can read (remove it and log in again)", p)
	}
	if r.Version != 1 {
		return nil, stamp{}, fmt.Errorf("oauth: %s has version %d, which this version cannot read", p, r.Version)
	}
	st, _ := s.stamp(name)
	return &r, st, nil
}

// stamp is the current stamp of name's file, the zero stamp when there is
// none.
func (s *Store) stamp(name string) (stamp, error) {
	fi, err := os.Stat(s.Path(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stamp{}, nil
		}
		return stamp{}, err
	}
	return stamp{mod: fi.ModTime(), size: fi.Size(), ino: inode(fi)}, nil
}

// encodeRecord is a record as its file holds it.
func encodeRecord(r *record) ([]byte, error) {
	r.Version = 1
	data, err := json.MarshalIndent(r, "", "  ")
	return append(data, '\n'), err
}

// save replaces name's file with data (an encoded record), atomically.
func (s *Store) save(name string, data []byte) (stamp, error) {
	p := s.Path(name)
	if err := writeFileAtomic(p, data); err != nil {
		return stamp{}, fmt.Errorf("oauth: writing %s: %w", p, err)
	}
	return s.stamp(name)
}

// writeFileAtomic writes data to a new file of mode 0600 beside path,
// syncs it, renames it over path and syncs the directory, so that path
// holds either its old contents or data, even across a crash.
func writeFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
