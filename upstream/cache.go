package upstream

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/snodod/snodod/internal/atomicfile"
	"github.com/snodod/snodod/mcpclient"
)

// cache is the on-disk catalog cache (docs/upstreams.md §4): after each
// listing, an upstream's catalog, era and version are stored in
// <dir>/<name>-<fingerprint>.json, so that a stopped or failed upstream
// stays listed and a lazy one need not start to be listed. The file holds
// what the upstream listed and nothing of its configuration (env values
// are only hashed into the fingerprint). An empty dir disables the cache.
// Its methods may be called from any goroutine.
//
// A state directory that cannot be written (read-only, full) costs only
// the cache: the upstreams are served all the same, and the log says so
// once, not at every listing, until a write succeeds again.
type cache struct {
	dir string
	log *slog.Logger
	// failing is set while writes fail (the first failure is logged).
	failing atomic.Bool
}

// failed logs a failed write, once until a write succeeds again.
func (c *cache) failed(msg string, args ...any) {
	if !c.failing.Swap(true) {
		c.log.Warn(msg+"; upstreams are served without it, and this is logged once until a write succeeds", args...)
	}
}

func (c *cache) path(u *upstream) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, u.name)
	return filepath.Join(c.dir, name+"-"+u.fingerprint+".json")
}

// load reads u's cached catalog.
func (c *cache) load(u *upstream) (*catalog, bool) {
	if c.dir == "" {
		return nil, false
	}
	b, err := os.ReadFile(c.path(u))
	if err != nil {
		return nil, false
	}
	var cat catalog
	if err := json.Unmarshal(b, &cat); err != nil || (cat.Era != mcpclient.EraLegacy && cat.Era != mcpclient.Era2026) {
		c.log.Warn("upstream catalog cache unreadable; ignored", "upstream", u.name, "path", c.path(u), "err", err)
		return nil, false
	}
	return &cat, true
}

// store writes u's catalog, replacing the file whole (a crash leaves the
// old one or the new one, never half of either), and at u's first store
// removes the files of its earlier fingerprints (a re-listing would find
// none to remove: u's fingerprint never changes).
func (c *cache) store(u *upstream, cat *catalog) {
	if c.dir == "" {
		return
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		c.failed("upstream catalog cache: cannot create its directory", "dir", c.dir, "err", err)
		return
	}
	b, err := json.Marshal(cat)
	if err != nil {
		return
	}
	final := c.path(u)
	if err := atomicfile.Write(final, b); err != nil {
		c.failed("upstream catalog cache: cannot write", "upstream", u.name, "path", final, "err", err)
		return
	}
	if c.failing.Swap(false) {
		c.log.Info("upstream catalog cache: written again", "dir", c.dir)
	}
	if u.cacheSwept.Swap(true) {
		return // the earlier fingerprints' files went at u's first store
	}
	old, _ := filepath.Glob(filepath.Join(c.dir, globEscape(filepath.Base(final[:len(final)-len(u.fingerprint)-len(".json")]))+"*.json"))
	for _, p := range old {
		if p != final && len(filepath.Base(p)) == len(filepath.Base(final)) {
			os.Remove(p)
		}
	}
}

func globEscape(s string) string {
	return strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`).Replace(s)
}
