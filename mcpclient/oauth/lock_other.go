//go:build !unix

package oauth

import "io/fs"

// lock is a no-op where flock does not exist: one process per store.
func (s *Store) lock(name string) (func(), error) { return func() {}, nil }

func inode(fs.FileInfo) uint64 { return 0 }
