package catalog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/server"
)

// This file opens a file under a served folder, enforcing the confinement
// rules at read time on the path as the kernel resolves it
// (docs/config.md, "Resources"): nothing outside the root, unless
// follow_symlinks lets a symlink lead out, and then still only a regular
// file; never a device, FIFO, socket or directory, nothing of /proc or
// /sys, no file with several hard links in a folder others may write to. openat2(2) with RESOLVE_BENEATH does the resolution, so a path
// cannot be swapped for a symlink between a check and the open.

// refused is a read the confinement rules refuse: -32602 with a message
// naming the rule.
func refused(uri, rule string) error {
	return &server.InvalidParamsError{Message: "Resource refused: " + rule, Data: map[string]string{"uri": uri}}
}

// cleanRel checks a path taken from a URI (percent-decoded already) and
// returns it cleaned, or the refusal naming the rule it breaks.
func cleanRel(uri, rel, root string) (string, error) {
	switch {
	case strings.ContainsRune(rel, 0):
		return "", refused(uri, "the path holds a NUL byte")
	case strings.HasPrefix(rel, "/"):
		return "", refused(uri, "an absolute path is not served; paths are relative to "+root)
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == ".." {
			return "", refused(uri, `".." is not allowed in a path: nothing outside `+root+" is served")
		}
	}
	return filepath.Clean(rel), nil
}

// procSuperMagic and sysfsMagic are the f_type of procfs and sysfs: their
// "regular files" are the kernel's, never a user's documents.
const (
	procSuperMagic = 0x9fa0
	sysfsMagic     = 0x62656572
)

// openConfined opens rel under root for reading. The file must be a
// regular file reached without leaving root (or, with follow, through any
// symlink). It returns the open file and its size when opened, or a
// refusal, or an error wrapping server.ErrResourceNotFound.
func openConfined(uri, root, rel string, follow bool) (*os.File, int64, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open the root %s: %w", root, err)
	}
	defer unix.Close(dir)
	resolve := uint64(unix.RESOLVE_NO_MAGICLINKS)
	if !follow {
		resolve |= unix.RESOLVE_BENEATH
	}
	// First without opening the file for reading: opening a FIFO would
	// wait for a writer, and opening a device may act on it.
	pathFD, err := openat2(dir, rel, unix.O_PATH|unix.O_CLOEXEC, resolve)
	if errors.Is(err, unix.EXDEV) && !follow {
		// RESOLVE_BENEATH refuses every absolute symlink, also one that
		// points inside the root: resolve it, and go on if it stays in.
		if inside, ok := resolvedInside(root, rel); ok {
			rel = inside
			pathFD, err = openat2(dir, rel, unix.O_PATH|unix.O_CLOEXEC, resolve)
		}
	}
	if err != nil {
		return nil, 0, openError(uri, root, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(pathFD, &st)
	if err == nil {
		err = checkKind(uri, pathFD, st.Mode)
	}
	if err == nil && st.Nlink > 1 {
		err = checkLinks(uri, root, dir, rel, resolve, st.Nlink)
	}
	unix.Close(pathFD)
	if err != nil {
		return nil, 0, err
	}
	fd, err := openat2(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, resolve)
	if err != nil {
		return nil, 0, openError(uri, root, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(root, rel))
	var again unix.Stat_t
	if err := unix.Fstat(fd, &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino || again.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, 0, refused(uri, "the file changed while it was being opened; try again")
	}
	return f, again.Size, nil
}

// openat2 retries what openat2(2) asks to be retried: EINTR, and EAGAIN,
// which RESOLVE_BENEATH returns when a rename elsewhere on the file system
// raced with the resolution (a few tries; then the read fails).
func openat2(dir int, rel string, flags int, resolve uint64) (int, error) {
	for again := 0; ; {
		fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: uint64(flags), Resolve: resolve})
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN && again < 16:
			again++
		default:
			return fd, err
		}
	}
}

// resolvedInside resolves every symlink of root/rel and returns the result
// relative to root when it stays inside root.
func resolvedInside(root, rel string) (string, bool) {
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", false
	}
	inside, err := filepath.Rel(root, real)
	if err != nil || inside == ".." || strings.HasPrefix(inside, "../") {
		return "", false
	}
	return inside, true
}

// checkLinks refuses a file with more than one hard link in a folder that
// another user can write to. A hard link is not a symlink: the kernel
// sees no path leading out, so RESOLVE_BENEATH cannot refuse it, and a
// user who may write in the folder could have linked a file of snodod's
// user from anywhere on the same file system into it (docs/security.md,
// "Files served"). In a folder only snodod's user writes, its links are
// that user's own doing. The folder is the file's own directory, as the
// kernel resolves it: whoever can replace a directory on the way to it
// owns the one found, and is caught by the same check.
func checkLinks(uri, root string, dir int, rel string, resolve uint64, links uint64) error {
	parent := filepath.Dir(rel)
	fd, err := openat2(dir, parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, resolve)
	if err != nil {
		return openError(uri, root, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat the folder of %s: %w", uri, err)
	}
	if int(st.Uid) == os.Geteuid() && st.Mode&0o022 == 0 {
		return nil
	}
	folder := filepath.Join(root, parent)
	return refused(uri, fmt.Sprintf("the file has %d hard links and its folder %s is writable by other users (uid %d, mode %04o), "+
		"so a link may lead to a file outside %s; remove the other links, or let only snodod's user write to the folder (chown, chmod go-w)",
		links, folder, st.Uid, st.Mode&0o7777, root))
}

// checkKind refuses anything but a regular file outside /proc and /sys.
func checkKind(uri string, fd int, mode uint32) error {
	var kind string
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return err
		}
		if sfs.Type == procSuperMagic || sfs.Type == sysfsMagic {
			return refused(uri, "files of /proc and /sys are not served")
		}
		return nil
	case unix.S_IFDIR:
		kind = "a directory"
	case unix.S_IFIFO:
		kind = "a FIFO"
	case unix.S_IFSOCK:
		kind = "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		kind = "a device"
	default:
		kind = "not a regular file"
	}
	return refused(uri, "only regular files are served, and this is "+kind)
}

// openError words an openat2 failure for the client.
func openError(uri, root string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENAMETOOLONG):
		// A name longer than the file system allows names no file
		// (found by FuzzFileResolution: it was an internal error).
		return fmt.Errorf("%s: %w", uri, server.ErrResourceNotFound)
	case errors.Is(err, unix.EXDEV):
		return refused(uri, "a symlink leads outside "+root+"; set follow_symlinks = true to serve what it points to")
	case errors.Is(err, unix.ELOOP):
		return refused(uri, "too many levels of symlinks (a symlink loop), or a /proc link")
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("open %s: file resources need openat2(2), Linux 5.6 or later: %w", uri, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &server.InvalidParamsError{Message: "Resource not readable: permission denied (snodod reads files as its own user)",
			Data: map[string]string{"uri": uri}}
	}
	return fmt.Errorf("open %s: %w", uri, err)
}
