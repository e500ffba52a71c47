package catalog

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

// folder serves one [resources.NAME] entry: a folder's files as resources
// with file:// URIs of their real paths, a {+path} template for any file
// under it, and change notifications from its watcher (files_watch.go).
// Every read goes through read, which applies the confinement rules and
// include/exclude at read time, whatever the listing said. A single file
// is a folder of one, without a template.
//
// start registers everything on srv; stop ends the watch and, when asked,
// removes what start registered. Its methods may be called from any
// goroutine.
type folder struct {
	cfg config.FileResource
	srv *server.Server
	log *slog.Logger
	// root is the directory reads are resolved under: cfg.Path, or its
	// parent for a single file.
	root    string
	rootURI string // file:// URI of root, without a trailing /

	mu       sync.Mutex
	listed   map[string]bool // rel → listed as a resource
	warnings []string
	watch    *watcher
}

func newFolder(srv *server.Server, cfg config.FileResource, log *slog.Logger) *folder {
	f := &folder{cfg: cfg, srv: srv, log: log.With("resource", cfg.Name), listed: map[string]bool{}}
	f.root = cfg.Path
	if !cfg.Dir {
		f.root = filepath.Dir(cfg.Path)
	}
	f.rootURI = strings.TrimSuffix(fileURI(f.root), "/")
	return f
}

// fileURI is the file:// URI of an absolute path, percent-encoded.
func fileURI(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }

// templateURI is the folder's URI template.
func (f *folder) templateURI() string { return f.rootURI + "/{+path}" }

// start watches the folder, lists its files, and registers them and the
// template.
func (f *folder) start() {
	f.watch = newWatcher(f)
	var rels []string
	if f.cfg.Dir {
		var more bool
		rels, more = f.watch.walk(f.root, f.cfg.MaxListedFiles)
		if more {
			f.warnUnlisted()
		}
		f.srv.AddResourceTemplate(&server.ResourceTemplate{
			URITemplate: f.templateURI(),
			Name:        f.cfg.Name,
			Title:       f.cfg.Title,
			Description: f.cfg.Description,
		}, f.readTemplate)
	} else {
		f.watch.watchDir(f.root)
		rels = []string{filepath.Base(f.cfg.Path)}
	}
	f.mu.Lock()
	for _, rel := range rels {
		f.listed[rel] = true
	}
	f.mu.Unlock()
	if len(rels) > 0 {
		f.srv.AddResources(f.items(rels)...)
	}
	f.watch.run()
}

// stop ends the watch; with unregister, it also removes the folder's
// resources and template from the server (an entry removed or changed by
// a reload).
func (f *folder) stop(unregister bool) {
	f.watch.stop()
	if !unregister {
		return
	}
	f.mu.Lock()
	uris := make([]string, 0, len(f.listed))
	for rel := range f.listed {
		uris = append(uris, f.uri(rel))
	}
	f.listed = map[string]bool{}
	f.mu.Unlock()
	if len(uris) > 0 {
		f.srv.RemoveResources(uris...)
	}
	if f.cfg.Dir {
		f.srv.RemoveResourceTemplates(f.templateURI())
	}
}

// Warnings returns what the folder could not do (the watch budget
// exceeded, files not listed), for status.
func (f *folder) Warnings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.warnings...)
}

// warn logs a warning and keeps it for status, once per text.
func (f *folder) warn(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.warnings {
		if w == text {
			return
		}
	}
	f.warnings = append(f.warnings, text)
	f.log.Warn(text)
}

// uri is the URI of the file at rel, a path under root.
func (f *folder) uri(rel string) string {
	return fileURI(filepath.Join(f.root, rel))
}

func (f *folder) warnUnlisted() {
	f.warn(fmt.Sprintf("resources.%s: more than %d files; only %d are listed (max_listed_files), the others can still be read through %s",
		f.cfg.Name, f.cfg.MaxListedFiles, f.cfg.MaxListedFiles, f.templateURI()))
}

// listable reports whether the entry at rel would be read: selected by
// include/exclude, and a regular file (a symlink is opened to find out).
func (f *folder) listable(rel string, d fs.DirEntry) bool {
	if !f.selected(rel) {
		return false
	}
	if d != nil && d.Type().IsRegular() {
		return true
	}
	if d != nil && d.Type()&fs.ModeSymlink == 0 {
		return false // FIFOs, sockets and devices are never listed
	}
	file, _, err := openConfined(f.uri(rel), f.root, rel, f.cfg.FollowSymlinks)
	if err != nil {
		return false
	}
	file.Close()
	return true
}

// selected reports whether include and exclude select the file at rel.
func (f *folder) selected(rel string) bool {
	slashed := filepath.ToSlash(rel)
	if !f.cfg.Dir {
		return slashed == filepath.Base(f.cfg.Path)
	}
	if f.excludedDir(path.Dir(slashed)) {
		return false
	}
	included := false
	for _, g := range f.cfg.Include {
		included = included || matchGlob(g, slashed)
	}
	if !included {
		return false
	}
	for _, g := range f.cfg.Exclude {
		if matchGlob(g, slashed) {
			return false
		}
	}
	return true
}

// excludedDir reports whether an exclude glob matches the folder at rel or
// one of its parents: an excluded folder is skipped whole.
func (f *folder) excludedDir(rel string) bool {
	for dir := filepath.ToSlash(rel); dir != "." && dir != "/" && dir != ""; dir = path.Dir(dir) {
		for _, g := range f.cfg.Exclude {
			if matchGlob(g, dir) {
				return true
			}
		}
	}
	return false
}

// items makes the listing entries of the files at rels. The MIME type
// comes from the extension only: a listing does not read the files.
func (f *folder) items(rels []string) []server.ResourceItem {
	items := make([]server.ResourceItem, 0, len(rels))
	for _, rel := range rels {
		r := &server.Resource{URI: f.uri(rel), Name: filepath.ToSlash(rel), MIMEType: typeByExtension(rel)}
		if !f.cfg.Dir {
			r.Name, r.Title, r.Description = f.cfg.Name, f.cfg.Title, f.cfg.Description
		}
		if fi, err := os.Stat(filepath.Join(f.root, rel)); err == nil {
			size := fi.Size()
			r.Size = &size
			r.Annotations = &server.Annotations{LastModified: fi.ModTime().UTC().Format(time.RFC3339)}
		}
		items = append(items, server.ResourceItem{Resource: r, Handler: f.readListed})
	}
	return items
}

// readListed reads a listed file: its URI is the file's own.
func (f *folder) readListed(ctx context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
	rawRel, ok := strings.CutPrefix(req.URI, f.rootURI+"/")
	if !ok {
		return nil, server.ErrResourceNotFound
	}
	return f.read(ctx, req.URI, rawRel)
}

// readTemplate reads any file under the folder through the template.
func (f *folder) readTemplate(ctx context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
	return f.read(ctx, req.URI, req.Params["path"])
}

// read serves the file at rawRel, a percent-encoded path under root.
func (f *folder) read(_ context.Context, uri, rawRel string) (*server.ReadResourceResult, error) {
	decoded, err := url.PathUnescape(rawRel)
	if err != nil {
		return nil, refused(uri, "the path is not validly percent-encoded")
	}
	rel, err := cleanRel(uri, decoded, f.root)
	if err != nil {
		return nil, err
	}
	if !f.selected(rel) {
		return nil, refused(uri, fmt.Sprintf("the file is not selected by resources.%s.include and exclude", f.cfg.Name))
	}
	file, size, err := openConfined(uri, f.root, rel, f.cfg.FollowSymlinks)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	limit := int64(f.cfg.MaxFileBytes)
	if size > limit {
		return nil, tooLarge(uri, size, f.cfg)
	}
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	if int64(len(data)) > limit { // it grew since fstat
		return nil, tooLarge(uri, int64(len(data)), f.cfg)
	}
	mimeType, text := contentType(rel, data)
	c := server.ResourceContents{URI: uri, MIMEType: mimeType}
	if text {
		c.Text = string(data)
	} else {
		c.Blob = data
		if c.Blob == nil {
			c.Blob = []byte{}
		}
	}
	return &server.ReadResourceResult{Contents: []server.ResourceContents{c}}, nil
}

func tooLarge(uri string, size int64, cfg config.FileResource) error {
	return &server.InvalidParamsError{
		Message: fmt.Sprintf("Resource too large: %d bytes or more, and resources.%s.max_file_bytes is %d", size, cfg.Name, cfg.MaxFileBytes),
		Data:    map[string]string{"uri": uri},
	}
}
