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

func init() {
	registerEntrySection(&entrySection{name: "resources", decode: decodeResources})
}

func decodeResources(ctx entryContext, table map[string]any, c *Config) []Problem {
	return eachEntry("resources", "resource", ctx, table, func(f *fields, name string) {
		r := decodeResource(f, name, ctx)
		if r == nil {
			return
		}
		for _, other := range c.Resources {
			if within(r.Path, other.Path) || within(other.Path, r.Path) {
				f.warn("path", fmt.Sprintf("%s and resources.%s.path (%s) overlap: their files are served twice, and the first by name lists them", r.Path, other.Name, other.Path))
			}
		}
		c.Resources = append(c.Resources, *r)
	})
}

func decodeResource(f *fields, name string, ctx entryContext) *FileResource {
	r := &FileResource{
		Name:           name,
		Title:          f.str("title", ""),
		Description:    f.str("description", ""),
		Include:        globs(f, "include", []string{"**"}),
		Exclude:        globs(f, "exclude", []string{}),
		FollowSymlinks: f.boolean("follow_symlinks", false),
		MaxFileBytes:   f.positiveInt("max_file_bytes", DefaultMaxFileBytes),
		MaxWatchedDirs: f.positiveInt("max_watched_dirs", DefaultMaxWatchedDirs),
		MaxListedFiles: f.positiveInt("max_listed_files", DefaultMaxListedFiles),
	}
	p := f.str("path", "")
	if !f.has("path") || p == "" {
		f.problem("path", `is required: the folder (or the file) to serve, such as "~/notes"`)
		return nil
	}
	p = entryPath(p, ctx)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		f.problem("path", fmt.Sprintf("%s does not exist or cannot be reached (%v)", p, pathErr(err)))
		return nil
	}
	fi, err := os.Stat(real)
	switch {
	case err != nil:
		f.problem("path", fmt.Sprintf("%s cannot be read (%v)", real, pathErr(err)))
		return nil
	case fi.IsDir():
		r.Dir = true
	case !fi.Mode().IsRegular():
		f.problem("path", fmt.Sprintf("must be a folder or a regular file, got %s (%s)", real, fi.Mode().Type()))
		return nil
	case f.has("include") || f.has("exclude"):
		f.problem("include", "applies to a folder only: "+real+" is a file")
	}
	r.Path = real
	return r
}

// globs reads a list of globs and checks each segment's syntax.
func globs(f *fields, name string, def []string) []string {
	list := f.strs(name, def)
	for _, g := range list {
		if g == "" || strings.HasPrefix(g, "/") || slices.Contains(strings.Split(g, "/"), "..") {
			f.problem(name, "entries must be globs relative to path (no leading /, no ..), got "+literal(g))
			continue
		}
		for _, seg := range strings.Split(g, "/") {
			if _, err := path.Match(seg, ""); err != nil {
				f.problem(name, "entries must be globs (*, ?, [a-z], and ** for any number of folders), got "+literal(g))
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
