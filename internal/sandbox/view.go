package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The view is built in a tmpfs mounted over /tmp, which then becomes the
// root (pivot_root). Every bind's source is opened (O_PATH) before that
// tmpfs covers /tmp, and bound from its descriptor (/proc/self/fd/N), so a
// granted path under /tmp (a test's directory) is still reachable.
const viewRoot = "/tmp"

// bindSource is one bind of the view: where it comes from on the host (the
// path with its symlinks resolved, opened before /tmp is covered) and
// where it goes.
type bindSource struct {
	Grant
	real string
	dir  bool
	fd   int
}

// source is the path a bind mounts from.
func (b bindSource) source() string { return "/proc/self/fd/" + strconv.Itoa(b.fd) }

// openSource opens path (symlinks resolved) as a bind source.
func openSource(g Grant) (bindSource, error) {
	b := bindSource{Grant: g, fd: -1}
	var err error
	if b.real, err = filepath.EvalSymlinks(g.Path); err != nil {
		return b, err
	}
	if b.fd, err = unix.Open(b.real, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
		return b, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(b.fd, &st); err != nil {
		unix.Close(b.fd)
		return b, err
	}
	b.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	return b, nil
}

// buildView makes the mount namespace's root a view of only the granted
// paths: read-only binds of the read-only grants, read-write binds of the
// others, empty read-only tmpfs over the hidden paths (the private home
// bound again inside one), a /dev of the harmless devices, a /proc of the
// PID namespace, /sys read-only and a private /tmp. Nothing propagates
// back to the host (every mount is made private first).
func (l *launcher) buildView() error {
	p := l.pl.Policy
	var binds []bindSource
	var home *bindSource
	defer func() {
		for _, b := range binds {
			unix.Close(b.fd)
		}
		if home != nil {
			unix.Close(home.fd)
		}
	}()
	for _, g := range l.pl.Grants {
		b, err := openSource(g)
		if err != nil {
			continue // missing: nothing to show
		}
		if g.Path == filepath.Clean(p.Home) {
			home = &b
			continue
		}
		binds = append(binds, b)
	}
	slices.SortFunc(binds, func(a, b bindSource) int { return strings.Compare(a.real, b.real) })
	var hidden []string
	for _, h := range p.Hide {
		if real, err := filepath.EvalSymlinks(h); err == nil {
			hidden = append(hidden, real)
		}
	}
	slices.Sort(hidden)
	links := symlinkPrefixes(l.pl.Grants)
	special, err := openSpecial()
	if err != nil {
		return err
	}
	defer func() {
		for _, fd := range special {
			unix.Close(fd)
		}
	}()

	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", viewRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount the view's root: %w", err)
	}
	// The special mounts first, so that a grant under /tmp (a test's
	// directory, a home under it) is bound inside the private /tmp.
	if err := l.specialMounts(special); err != nil {
		return err
	}
	var bound []bindSource // what is mounted so far, in order
	for _, b := range binds {
		if covered(bound, b) {
			continue
		}
		if err := bindInto(b); err != nil {
			return fmt.Errorf("%s: %w", b.Path, err)
		}
		bound = append(bound, b)
	}
	for _, link := range links {
		target := viewRoot + link.path
		if _, err := os.Lstat(target); err == nil {
			continue // inside a bind: the host's own symlink is there
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			_ = os.Symlink(link.text, target)
		}
	}
	var hides []string
	for _, h := range hidden {
		fi, err := os.Lstat(viewRoot + h)
		if err != nil || !fi.IsDir() {
			continue // not visible anyway
		}
		if err := unix.Mount("tmpfs", viewRoot+h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
		hides = append(hides, viewRoot+h)
	}
	if home != nil {
		if err := bindInto(*home); err != nil {
			return fmt.Errorf("private home: %w", err)
		}
	}
	for _, h := range hides {
		if err := setattr(h, false, unix.MOUNT_ATTR_RDONLY); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
	}
	if err := setattr(viewRoot+"/dev", false, unix.MOUNT_ATTR_RDONLY); err != nil {
		return fmt.Errorf("/dev read-only: %w", err)
	}
	if err := os.Chdir(viewRoot); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on the view; detaching it
	// leaves only the view.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into the view: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	return setattr("/", false, unix.MOUNT_ATTR_RDONLY)
}

// covered reports whether b is already in the view with the same right:
// inside a bind of the same mode, with no bind of the other mode between.
func covered(bound []bindSource, b bindSource) bool {
	for i := len(bound) - 1; i >= 0; i-- {
		if within(b.real, bound[i].real) {
			return bound[i].Write == b.Write && bound[i].dir
		}
	}
	return false
}

// bindInto binds b's real path at the same path in the view, read-only
// unless it is writable, never with set-uid or device files.
func bindInto(b bindSource) error {
	target := viewRoot + b.real
	if err := makeMountpoint(target, b.dir); err != nil {
		return err
	}
	if err := unix.Mount(b.source(), target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !b.Write {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	return setattr(target, true, attr)
}

// makeMountpoint creates target (a directory, or an empty file) unless it
// exists.
func makeMountpoint(target string, dir bool) error {
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// setattr adds attributes to the mount at path (and those below it when
// recursive). mount_setattr (Linux 5.12) changes only what it is given, so
// the flags the kernel locked on mounts from a more privileged namespace
// stay as they are.
func setattr(path string, recursive bool, attr uint64) error {
	flags := uint(0)
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	err := unix.MountSetattr(unix.AT_FDCWD, path, flags, &unix.MountAttr{Attr_set: attr})
	if !errors.Is(err, unix.ENOSYS) {
		return err
	}
	// Older kernels: a remount, keeping the locked flags the mount has.
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	mflags := uintptr(unix.MS_BIND | unix.MS_REMOUNT)
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			mflags |= uintptr(f.ms)
		}
	}
	if attr&unix.MOUNT_ATTR_RDONLY != 0 {
		mflags |= unix.MS_RDONLY
	}
	if attr&unix.MOUNT_ATTR_NOSUID != 0 {
		mflags |= unix.MS_NOSUID
	}
	if attr&unix.MOUNT_ATTR_NODEV != 0 {
		mflags |= unix.MS_NODEV
	}
	return unix.Mount("", path, "", mflags, "")
}

// specialDevices are the devices of the view's /dev: nothing with data.
var specialDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// openSpecial opens the sources of the special mounts (the devices, /sys,
// and /proc for when the PID namespace's own cannot be mounted).
func openSpecial() (map[string]int, error) {
	fds := map[string]int{}
	for _, d := range specialDevices {
		fd, err := unix.Open("/dev/"+d, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fds, fmt.Errorf("/dev/%s: %w", d, err)
		}
		fds["/dev/"+d] = fd
	}
	for _, d := range []string{"/sys", "/proc"} {
		if fd, err := unix.Open(d, unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0); err == nil {
			fds[d] = fd
		}
	}
	return fds, nil
}

// specialMounts gives the view its /dev, /proc, /sys and /tmp.
func (l *launcher) specialMounts(src map[string]int) error {
	from := func(path string) string { return "/proc/self/fd/" + strconv.Itoa(src[path]) }
	size := l.pl.Policy.limits().MemoryBytes
	tmpSize := ""
	if size > 0 {
		// The private /tmp and /dev/shm hold memory too: bounded like it.
		tmpSize = ",size=" + strconv.FormatInt(size, 10)
	}
	dev := viewRoot + "/dev"
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range specialDevices {
		if err := makeMountpoint(dev+"/"+d, false); err != nil {
			return err
		}
		if err := unix.Mount(from("/dev/"+d), dev+"/"+d, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	// A devpts of its own, for the server's own ptys; not fatal without.
	_ = unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777"+tmpSize); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}

	proc := viewRoot + "/proc"
	if err := os.MkdirAll(proc, 0o755); err != nil {
		return err
	}
	if l.got.PID && unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "") == nil {
		l.proc = true
	} else if _, ok := src["/proc"]; !ok {
		return errors.New("no /proc to show")
	} else if err := unix.Mount(from("/proc"), proc, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind /proc: %w", err)
	}

	// /sys without what is mounted under it (the cgroup trees): fewer
	// mounts to copy, and nothing a server needs.
	sys := viewRoot + "/sys"
	if err := os.MkdirAll(sys, 0o755); err != nil {
		return err
	}
	if _, ok := src["/sys"]; ok && unix.Mount(from("/sys"), sys, "", unix.MS_BIND, "") == nil {
		_ = setattr(sys, false, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	}

	tmp := viewRoot + "/tmp"
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"+tmpSize); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	return nil
}

// symlink is a symlink of the host to recreate in the view.
type symlink struct{ path, text string }

// symlinkPrefixes returns, for each grant, the first component of its path
// that is a symlink on the host (/bin, /lib64; /home on systems that keep
// it under /var), so that the path as named still leads to its bind.
func symlinkPrefixes(grants []Grant) []symlink {
	var out []symlink
	seen := map[string]bool{}
	for _, g := range grants {
		prefix := ""
		for _, c := range strings.Split(strings.TrimPrefix(filepath.Clean(g.Path), "/"), "/") {
			prefix += "/" + c
			fi, err := os.Lstat(prefix)
			if err != nil {
				break
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				continue
			}
			if text, err := os.Readlink(prefix); err == nil && !seen[prefix] {
				seen[prefix] = true
				out = append(out, symlink{prefix, text})
			}
			break
		}
	}
	return out
}
