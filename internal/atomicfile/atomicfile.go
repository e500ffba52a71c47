// Package atomicfile replaces files whole: a reader, or a process that
// crashes midway, sees the old content or the new one, never half of
// either. The catalog cache of hosted servers (upstream/) and the group
// records (internal/proc) use it.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces the file at path with data: it writes a temporary file
// next to it (path + "." and random digits) and renames it over path. On
// failure the temporary file is removed and path is untouched. The new
// file's mode is 0600.
func Write(path string, data []byte) error {
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
