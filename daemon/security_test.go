package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSymlinkDirectoryRefused: a symlink in place of the socket directory
// is refused, even one that leads to a directory of the daemon's own with
// mode 0700, and nothing is created through it.
func TestSymlinkDirectoryRefused(t *testing.T) {
	base := shortDir(t)
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-own-dir": real, "dangling": filepath.Join(base, "missing")} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(base, name)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			d, err := New(testConfig(t, link, nil), Options{Logger: testLogger()})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Run(t.Context())
			want := "socket directory " + link + " is a symlink (to " + target + "); snodod does not follow it: remove it, or set daemon.socket to a path in the real directory"
			if err == nil || err.Error() != want {
				t.Errorf("Run: %v\nwant %s", err, want)
			}
			for _, p := range []string{filepath.Join(real, "s.sock"), filepath.Join(real, "s.sock.lock"), target} {
				if p == real {
					continue
				}
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was created through the symlink", p)
				}
			}
		})
	}
}
