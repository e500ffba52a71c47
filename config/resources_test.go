package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResourceLoads(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes")
	if err := os.Mkdir(notes, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(notes, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(notes, "a.md")
	if err := os.WriteFile(file, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(`
[resources.notes]
path = "link"
include = ["**/*.md", "*.txt"]
description = "My notes"

[resources.one]
path = "notes/a.md"
max_file_bytes = 100
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustLoad(t, Options{File: path, Env: testEnv(t)})
	if len(c.Resources) != 2 {
		t.Fatalf("resources = %+v", c.Resources)
	}
	n, one := c.Resources[0], c.Resources[1]
	// The path is taken from the file's directory and its symlink resolved.
	if n.Name != "notes" || n.Path != notes || !n.Dir || !slices.Equal(n.Include, []string{"**/*.md", "*.txt"}) ||
		len(n.Exclude) != 0 || n.Description != "My notes" || n.FollowSymlinks {
		t.Errorf("notes = %+v", n)
	}
	if n.MaxFileBytes != 10<<20 || n.MaxWatchedDirs != 4096 || n.MaxListedFiles != 10000 {
		t.Errorf("notes limits = %d %d %d", n.MaxFileBytes, n.MaxWatchedDirs, n.MaxListedFiles)
	}
	if one.Path != file || one.Dir || one.MaxFileBytes != 100 || !slices.Equal(one.Include, []string{"**"}) {
		t.Errorf("one = %+v", one)
	}
	if w := c.Warnings(); len(w) != 1 || w[0].String() != "resources.one.path: "+file+" and resources.notes.path ("+notes+") overlap: their files are served twice, and the first by name lists them" {
		t.Errorf("warnings = %v", w)
	}
}

func TestResourceProblems(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, entry string
		want        []string
	}{
		{"no path", `description = "x"`, []string{`resources.r.path: is required: the folder (or the file) to serve, such as "~/notes"`}},
		{"missing", `path = "/nonexistent/notes"`, []string{"resources.r.path: /nonexistent/notes does not exist or cannot be reached (no such file or directory)"}},
		{"fifo", `path = "` + fifo + `"`, []string{"resources.r.path: must be a folder or a regular file, got " + fifo + " (p---------)"}},
		{"globs on a file", `path = "` + file + `"
include = ["*.md"]`, []string{"resources.r.include: applies to a folder only: " + file + " is a file"}},
		{"bad globs", `path = "` + dir + `"
include = ["/abs", "../up", "[x"]
exclude = "x"`, []string{
			`resources.r.exclude: must be a list of strings, got "x"`,
			`resources.r.include: entries must be globs relative to path (no leading /, no ..), got "/abs"`,
			`resources.r.include: entries must be globs relative to path (no leading /, no ..), got "../up"`,
			`resources.r.include: entries must be globs (*, ?, [a-z], and ** for any number of folders), got "[x"`,
		}},
		{"limits", `path = "` + dir + `"
max_file_bytes = 0
max_watched_dirs = -1
max_listed_files = 1.5
follow_symlinks = 1
follow_symlink = true`, []string{
			`unknown key "resources.r.follow_symlink"; did you mean "resources.r.follow_symlinks"?`,
			"resources.r.follow_symlinks: must be true or false, got 1",
			"resources.r.max_file_bytes: must be a positive integer, got 0",
			"resources.r.max_listed_files: must be a positive integer, got 1.5",
			"resources.r.max_watched_dirs: must be a positive integer, got -1",
		}},
		{"boundaries", `path = "` + dir + `"
max_file_bytes = 1
max_watched_dirs = 1
max_listed_files = 1`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.toml", "[resources.r]\n"+tc.entry+"\n")
			if got := checkLines(t, Options{File: path, Env: testEnv(t)}); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestEntryNotATable(t *testing.T) {
	path := writeFile(t, "config.toml", "[tools]\nx = 3\n[prompts]\n\"bad name\" = { template = \"t\" }\n")
	want := []string{
		`prompts."bad name": is not a valid prompt name: names may use only letters, digits, _, - and ., at most 64 of them`,
		"tools.x: must be a table, got 3",
	}
	if got := checkLines(t, Options{File: path, Env: testEnv(t)}); !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
