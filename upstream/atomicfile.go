package upstream

import (
	"os"
	"path/filepath"
)

// writeFileAtomic replaces the file at path with data: it writes a
// temporary file next to it (path + "." and random digits) and renames it
// over path, so that a reader, or a daemon that crashes midway, sees the
// old content or the new one, never half of either. On failure the
// temporary file is removed and path is untouched. The catalog cache
// (cache.go) and the group record (orphans.go) use it.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
