package config

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The defaults of a file resource's limits (docs/config.md, "Resources").
const (
	DefaultMaxFileBytes   = 10 << 20
	DefaultMaxWatchedDirs = 4096
	DefaultMaxListedFiles = 10000
)

// FileResource is one [resources.NAME] entry: a folder whose files are
// served as resources, or one file (catalog/files.go serves it). A
// FileResource from Load is valid.
type FileResource struct {
	Name        string
	Title       string
	Description string
	// Path is the folder or the file, absolute, with every symlink
	// resolved: the real path its file:// URIs are made of.
	Path string
	// Dir is true for a folder.
	Dir bool
	// Include and Exclude are globs over paths relative to Path, with /
	// between segments: * and ? stay within a segment, ** matches any
	// number of segments. A file is served when it matches an Include
	// and no Exclude.
	Include []string
	Exclude []string
	// FollowSymlinks serves files whose symlinks lead out of Path (still
	// only regular files).
	FollowSymlinks bool
	// MaxFileBytes is the largest file read. >= 1.
	MaxFileBytes int
	// MaxWatchedDirs is how many directories are watched for changes;
	// beyond it, changes in the others are not announced. >= 1.
	MaxWatchedDirs int
	// MaxListedFiles is how many files resources/list shows; the others
	// can still be read through the template. >= 1.
	MaxListedFiles int
}

// resourceEntry is a [resources.NAME] entry as written.
type resourceEntry struct {
	Title          string    `key:"title"`
	Description    string    `key:"description"`
	Path           string    `key:"path"`
	Include        *[]string `key:"include"`
	Exclude        *[]string `key:"exclude"`
	FollowSymlinks bool      `key:"follow_symlinks"`
	MaxFileBytes   int       `key:"max_file_bytes,positive"`
	MaxWatchedDirs int       `key:"max_watched_dirs,positive"`
	MaxListedFiles int       `key:"max_listed_files,positive"`
}

func (r *resourceEntry) setDefaults() {
	r.MaxFileBytes, r.MaxWatchedDirs, r.MaxListedFiles = DefaultMaxFileBytes, DefaultMaxWatchedDirs, DefaultMaxListedFiles
}

func init() {
	registerEntrySection(&entrySection{name: "resources", decode: decodeResources})
}

func decodeResources(ctx entryContext, table map[string]any, c *Config) []Problem {
	d := &entryDecoder{}
	eachEntry(d, "resources", "resource", ctx.Source, table, func(f field, name string, raw any) {
		var e resourceEntry
		e.setDefaults()
		if !f.table(raw, &e) {
			return
		}
		r := e.resource(f, name, ctx)
		if r == nil {
			return
		}
		for _, other := range c.Resources {
			if within(r.Path, other.Path) || within(other.Path, r.Path) {
				f.child("path").warn(fmt.Sprintf("%s and resources.%s.path (%s) overlap: their files are served twice, and the first by name lists them", r.Path, tomlKey(other.Name), other.Path))
			}
		}
		c.Resources = append(c.Resources, *r)
	})
	return d.problems
}

// resource provisions e: its path resolved and looked at.
func (e *resourceEntry) resource(f field, name string, ctx entryContext) *FileResource {
	r := &FileResource{
		Name: name, Title: e.Title, Description: e.Description,
		Include: []string{"**"}, Exclude: []string{}, FollowSymlinks: e.FollowSymlinks,
		MaxFileBytes: e.MaxFileBytes, MaxWatchedDirs: e.MaxWatchedDirs, MaxListedFiles: e.MaxListedFiles,
	}
	if e.Include != nil {
		r.Include = globs(f.child("include"), *e.Include)
	}
	if e.Exclude != nil {
		r.Exclude = globs(f.child("exclude"), *e.Exclude)
	}
	pf := f.child("path")
	if e.Path == "" {
		pf.problem(`is required: the folder (or the file) to serve, such as "~/notes"`)
		return nil
	}
	p := ctx.path(e.Path)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		pf.problem(fmt.Sprintf("%s does not exist or cannot be reached (%v)", p, pathErr(err)))
		return nil
	}
	fi, err := os.Stat(real)
	switch {
	case err != nil:
		pf.problem(fmt.Sprintf("%s cannot be read (%v)", real, pathErr(err)))
		return nil
	case fi.IsDir():
		r.Dir = true
	case !fi.Mode().IsRegular():
		pf.problem(fmt.Sprintf("must be a folder or a regular file, got %s (%s)", real, fi.Mode().Type()))
		return nil
	case e.Include != nil || e.Exclude != nil:
		f.child("include").problem("applies to a folder only: " + real + " is a file")
	}
	r.Path = real
	return r
}

// globs reads a list of globs and checks each segment's syntax.
func globs(f field, list []string) []string {
	for _, g := range list {
		if g == "" || strings.HasPrefix(g, "/") || slices.Contains(strings.Split(g, "/"), "..") {
			f.problem("entries must be globs relative to path (no leading /, no ..), got " + literal(g))
			continue
		}
		for _, seg := range strings.Split(g, "/") {
			if _, err := path.Match(seg, ""); err != nil {
				f.problem("entries must be globs (*, ?, [a-z], and ** for any number of folders), got " + literal(g))
				break
			}
		}
	}
	return list
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
