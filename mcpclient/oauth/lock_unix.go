//go:build unix

package oauth

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// lock takes the advisory lock of name's record (flock on NAME.lock,
// mode 0600), waiting for another process that holds it; the function it
// returns releases it. The lock file is never removed: removing it would
// let two processes lock two different files of one name.
func (s *Store) lock(name string) (func(), error) {
	p := filepath.Join(s.dir, name+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("oauth: opening %s: %w", p, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("oauth: locking %s: %w", p, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// inode is the file's inode number: a file replaced by rename has a new
// one even when its time and size are the same.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
