package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// CoalesceWindow is how long a folder gathers file events before it
// announces them: a burst of writes to one file becomes one
// notifications/resources/updated per window, and files added or removed
// together one list change.
const CoalesceWindow = 100 * time.Millisecond

// watcher follows a folder's changes with fsnotify: one watch per
// directory (inotify does not recurse), at most max_watched_dirs of them.
// Its loop is the only goroutine that changes the folder's listing after
// start. stop may be called more than once.
type watcher struct {
	f    *folder
	fs   *fsnotify.Watcher // nil: no watch (it could not start)
	dirs map[string]bool   // watched directories; the loop's own after start
	done chan struct{}
	once sync.Once
}

// newWatcher returns a watcher of f with no directory watched yet; a
// watcher that cannot start warns and watches nothing.
func newWatcher(f *folder) *watcher {
	w := &watcher{f: f, dirs: map[string]bool{}, done: make(chan struct{})}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		f.warn(fmt.Sprintf("resources.%s: changes are not watched: %v", f.cfg.Name, err))
		close(w.done)
		return w
	}
	w.fs = fw
	return w
}

// run starts the loop, once the initial directories are watched.
func (w *watcher) run() {
	if w.fs != nil {
		go w.loop()
	}
}

// stop ends the watch and waits for the loop.
func (w *watcher) stop() {
	w.once.Do(func() {
		if w.fs != nil {
			w.fs.Close()
		}
	})
	<-w.done
}

// watchDir starts watching dir, within the budget. It reports false when
// the budget is spent (the caller need not descend further).
func (w *watcher) watchDir(dir string) bool {
	if w.fs == nil || w.dirs[dir] {
		return w.fs != nil
	}
	if len(w.dirs) >= w.f.cfg.MaxWatchedDirs {
		w.f.warn(fmt.Sprintf("resources.%s: more than %d folders; changes in the others are not announced (max_watched_dirs = %d)",
			w.f.cfg.Name, w.f.cfg.MaxWatchedDirs, w.f.cfg.MaxWatchedDirs))
		return false
	}
	if err := w.fs.Add(dir); err != nil {
		w.f.warn(fmt.Sprintf("resources.%s: cannot watch %s, so its changes are not announced: %v", w.f.cfg.Name, dir, err))
		return !errors.Is(err, fs.ErrNotExist)
	}
	w.dirs[dir] = true
	return true
}

func (w *watcher) loop() {
	defer close(w.done)
	pending := map[string]fsnotify.Op{}
	rescan := false
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	arm := func() {
		if !armed {
			timer.Reset(CoalesceWindow)
			armed = true
		}
	}
	for {
		select {
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			pending[ev.Name] |= ev.Op
			arm()
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				rescan = true // events were lost: compare the whole listing
				arm()
			} else {
				w.f.log.Warn("watching files", "err", err)
			}
		case <-timer.C:
			armed = false
			w.flush(pending, rescan)
			pending, rescan = map[string]fsnotify.Op{}, false
		}
	}
}

// flush turns one window's events into catalog changes: files added
// (listed, one list change), removed (one list change) and changed
// (notifications/resources/updated to their subscribers).
func (w *watcher) flush(pending map[string]fsnotify.Op, rescan bool) {
	f := w.f
	var added, removed, updated []string
	f.mu.Lock()
	listed := maps.Clone(f.listed)
	f.mu.Unlock()
	add := func(rel string) {
		if !listed[rel] && len(listed) < f.cfg.MaxListedFiles {
			listed[rel] = true
			added = append(added, rel)
		}
	}
	remove := func(rel string) {
		if listed[rel] {
			delete(listed, rel)
			removed = append(removed, rel)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		op := pending[name]
		rel, err := filepath.Rel(f.root, name)
		if err != nil || !f.cfg.Dir && rel != filepath.Base(f.cfg.Path) {
			continue
		}
		fi, err := os.Lstat(name)
		switch {
		case err != nil: // gone: a file, or a folder and all it held
			if w.dirs[name] {
				delete(w.dirs, name)
				_ = w.fs.Remove(name) // a renamed folder is still watched where it went
			}
			for r := range listed {
				if r == rel || strings.HasPrefix(r, rel+"/") {
					remove(r)
				}
			}
		case fi.IsDir():
			if f.cfg.Dir && op.Has(fsnotify.Create) && !f.excludedDir(rel) {
				rels, more := w.walk(name, f.cfg.MaxListedFiles-len(listed))
				for _, r := range rels {
					add(r)
				}
				if more {
					f.warnUnlisted()
				}
			}
		case listed[rel]:
			if op.Has(fsnotify.Write) || op.Has(fsnotify.Create) {
				updated = append(updated, rel)
			}
		case f.listable(rel, fs.FileInfoToDirEntry(fi)):
			if len(listed) < f.cfg.MaxListedFiles {
				add(rel)
				break
			}
			f.warnUnlisted()
			if op.Has(fsnotify.Write) {
				updated = append(updated, rel) // not listed, but readable through the template
			}
		}
	}
	if rescan {
		now, _ := w.walk(f.root, f.cfg.MaxListedFiles)
		present := map[string]bool{}
		for _, r := range now {
			present[r] = true
			add(r)
		}
		for r := range listed {
			if !present[r] {
				remove(r)
			}
		}
	}
	f.mu.Lock()
	f.listed = listed
	f.mu.Unlock()
	if len(added) > 0 {
		f.srv.AddResources(f.items(added)...)
	}
	if len(removed) > 0 {
		uris := make([]string, len(removed))
		for i, r := range removed {
			uris[i] = f.uri(r)
		}
		f.srv.RemoveResources(uris...)
	}
	for _, r := range updated {
		f.srv.ResourceUpdated(f.uri(r))
	}
}

// walk watches the folders under dir (dir included) and returns up to room
// of the files under it that would be listed, and whether there were more.
// A folder is watched before its entries are read, so a file created
// meanwhile is seen by one or the other.
func (w *watcher) walk(dir string, room int) (rels []string, more bool) {
	descend := true
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(w.f.root, p)
		if d.IsDir() {
			if rel != "." && w.f.excludedDir(rel) {
				return fs.SkipDir
			}
			if descend {
				descend = w.watchDir(p)
			}
			return nil
		}
		// Once more is known, a file is not examined: listable may open it.
		if !more && w.f.listable(rel, d) {
			if len(rels) == room {
				more = true
			} else {
				rels = append(rels, rel)
			}
		}
		return nil
	})
	return rels, more
}
