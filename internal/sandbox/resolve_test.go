package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tree makes files under root: a path ending in "/" is a directory, one
// with "->" a symlink, one with "#!" content an executable script, others
// executables.
func tree(t *testing.T, root string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		path, content, _ := strings.Cut(e, " ")
		full := filepath.Join(root, path)
		if strings.HasSuffix(path, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// grantsOf resolves argv under p and returns "rw PATH" / "ro PATH" lines
// relative to root (others as they are), the system's left out.
func grantsOf(t *testing.T, root string, p Policy, argv []string, env []string, dir string) []string {
	t.Helper()
	_, grants, err := resolve(p, argv, env, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range grants {
		if strings.HasPrefix(g.Why, "system") {
			continue
		}
		mode := "ro"
		if g.Write {
			mode = "rw"
		}
		out = append(out, mode+" "+strings.Replace(g.Path, root, "R", 1))
	}
	slices.Sort(out)
	return out
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	tree(t, root,
		"home/",
		"home/.nvm/versions/node/v22/bin/node",
		"home/.local/bin/uvx",
		"home/.cargo/bin/tool",
		"home/.cargo/credentials.toml",
		"node/bin/node",
		"tools/bin/script #!/usr/bin/env -S node --flag",
		"links/bin/cmd -> ../../real/lib/cmd.js",
		"real/lib/cmd.js #!"+filepath.Join(root, "node/bin/node"),
		"proj/node_modules/",
		"proj/build/package.json",
		"proj/build/index.js",
		"alias/index.js -> ../proj/build/index.js",
		"data/",
		"more/",
		"work/",
		"roots/r1/",
		"state/home/",
	)
	home := filepath.Join(root, "state/home")
	env := []string{"HOME=" + filepath.Join(root, "home"), "PATH=" + filepath.Join(root, "node/bin") + ":" + filepath.Join(root, "home/.local/bin") + ":/usr/bin:/bin"}
	standard := Policy{Level: Standard, Home: home}
	for _, tc := range []struct {
		name string
		p    Policy
		argv []string
		dir  string
		want []string
	}{
		{"a script through env: its prefix, env's, and the interpreter's", standard,
			[]string{filepath.Join(root, "tools/bin/script")}, "",
			[]string{"ro R/node", "ro R/tools", "rw R/state/home"}}, // /usr: the system's already
		{"a symlinked command: its prefix, its target's directory, and the shebang's", standard,
			[]string{filepath.Join(root, "links/bin/cmd")}, "",
			[]string{"ro R/links", "ro R/node", "ro R/real/lib", "rw R/state/home"}},
		{"a version manager's node: the whole manager", standard,
			[]string{filepath.Join(root, "home/.nvm/versions/node/v22/bin/node")}, "",
			[]string{"ro R/home/.nvm", "rw R/state/home"}},
		{"~/.local/bin: only the bin directory", standard,
			[]string{"uvx"}, "",
			[]string{"ro R/home/.local/bin", "rw R/state/home"}},
		{"~/.cargo/bin: only the bin directory, not the credentials beside it", standard,
			[]string{filepath.Join(root, "home/.cargo/bin/tool")}, "",
			[]string{"ro R/home/.cargo/bin", "rw R/state/home"}},
		{"arguments: directories read-write, a file's project read-only, --flag=/dir, never /", standard,
			[]string{"node", filepath.Join(root, "proj/build/index.js"), filepath.Join(root, "data"), "--out=" + filepath.Join(root, "more"), "/", "/no/such/dir", "relative/dir"}, filepath.Join(root, "work"),
			[]string{"ro R/node", "ro R/proj", "rw R/data", "rw R/more", "rw R/state/home", "rw R/work"}},
		{"a symlinked script: the project of its target too (node resolves modules from there)", standard,
			[]string{"node", filepath.Join(root, "alias/index.js")}, "",
			[]string{"ro R/alias", "ro R/node", "ro R/proj", "rw R/state/home"}},
		{"declared paths replace the guess, not a script's project; the working directory read-only; roots read-write", Policy{Level: Standard, Home: home, Paths: []string{filepath.Join(root, "more")}, Roots: []string{filepath.Join(root, "roots/r1")}, ReadOnly: []string{filepath.Join(root, "home/.cargo/credentials.toml")}},
			[]string{"node", filepath.Join(root, "proj/build/index.js"), filepath.Join(root, "data")}, filepath.Join(root, "work"),
			[]string{"ro R/home/.cargo/credentials.toml", "ro R/node", "ro R/proj", "ro R/work", "rw R/more", "rw R/roots/r1", "rw R/state/home"}},
		{"the guess from other arguments than the command's (an exec tool's fixed ones)", Policy{Level: Standard, Home: home, GuessFrom: []string{filepath.Join(root, "data")}},
			[]string{"node", filepath.Join(root, "proj/build/index.js"), filepath.Join(root, "more")}, "",
			[]string{"ro R/node", "rw R/data", "rw R/state/home"}},
		{"strict guesses nothing", Policy{Level: Strict, Home: home, Roots: []string{filepath.Join(root, "roots/r1")}},
			[]string{"node", filepath.Join(root, "data")}, filepath.Join(root, "work"),
			[]string{"ro R/node", "ro R/work", "rw R/roots/r1", "rw R/state/home"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := grantsOf(t, root, tc.p, tc.argv, env, tc.dir)
			if !slices.Equal(got, tc.want) {
				t.Errorf("grants\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("system paths", func(t *testing.T) {
		_, grants, err := resolve(standard, []string{"node"}, env, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"/usr", "/etc"} {
			if !slices.ContainsFunc(grants, func(g Grant) bool { return g.Path == want && !g.Write }) {
				t.Errorf("no read-only %s in %v", want, grants)
			}
		}
	})
	t.Run("a command not on the child's PATH", func(t *testing.T) {
		if _, _, err := resolve(standard, []string{"tool"}, env, ""); err == nil || !strings.Contains(err.Error(), `"tool"`) {
			t.Errorf("resolve: %v", err)
		}
	})
	t.Run("a relative command path", func(t *testing.T) {
		if _, _, err := resolve(standard, []string{"./node/bin/node"}, env, ""); err == nil || !strings.Contains(err.Error(), "relative") {
			t.Errorf("resolve: %v", err)
		}
	})
}

// TestCarve: without a view, a grant that contains a hidden path becomes
// the entries beside the way to it; the hidden path and the way are not
// granted, the private home under it keeps its own grant.
func TestCarve(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "a/", "b", "x/y/", "x/hidden/secret", "x/hidden/home/", "c/")
	hidden := filepath.Join(root, "x/hidden")
	home := filepath.Join(hidden, "home")
	grants, n := carve([]Grant{{Path: root, Write: true}, {Path: home, Write: true}, {Path: "/usr"}}, []string{hidden}, home)
	var got []string
	for _, g := range grants {
		got = append(got, strings.Replace(g.Path, root, "R", 1))
		if strings.HasPrefix(g.Path, root) && g.Path != home && !g.Write {
			t.Errorf("%s lost its write right", g.Path)
		}
	}
	slices.Sort(got)
	want := []string{"/usr", "R/a", "R/b", "R/c", "R/x/hidden/home", "R/x/y"}
	if !slices.Equal(got, want) || n != 1 {
		t.Errorf("carved %d:\n got %q\nwant %q", n, got, want)
	}
	if grants, _ := carve([]Grant{{Path: hidden}}, []string{hidden}, home); len(grants) != 0 {
		t.Errorf("a grant of the hidden path itself is kept: %v", grants)
	}
}
