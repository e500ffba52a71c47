package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Grant is one path a child may use, and why (shown by a report and, later,
// by `config check`).
type Grant struct {
	Path  string `json:"path"`
	Write bool   `json:"write,omitempty"`
	Why   string `json:"why"`
}

func (g Grant) String() string {
	mode := "ro"
	if g.Write {
		mode = "rw"
	}
	return fmt.Sprintf("%s %s (%s)", mode, g.Path, g.Why)
}

// systemPaths are read-only for every sandboxed child, where they exist.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix/store"}

// systemFiles are files under /etc that are often symlinks out of it
// (systemd-resolved's resolv.conf under /run): their targets are granted
// read-only too, or name resolution breaks.
var systemFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/localtime", "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt"}

// versionManagers are directories under a home that hold interpreters and
// the shims that run them: a command under one gets the whole manager
// read-only (a pyenv shim runs $PYENV_ROOT/libexec/pyenv, nvm's node its
// lib/node_modules). None holds credentials.
var versionManagers = []string{".nvm", ".pyenv", ".rbenv", ".asdf", ".volta", ".sdkman", ".fnm", ".local/share/mise", ".local/share/fnm", ".local/share/pnpm"}

// projectMarkers make a directory the project of a script named by an
// argument: node_modules and virtual environments first, then manifests.
var (
	projectDeps      = []string{"node_modules", ".venv", "venv"}
	projectManifests = []string{"package.json", "pyproject.toml", "setup.py", "requirements.txt", "go.mod", "Cargo.toml"}
)

// resolver computes the grants of one child.
type resolver struct {
	p     Policy
	env   []string
	homes []string // the user's real home directories (daemon's and child's HOME)
	rules []Grant
}

// lookEnv returns the value of key in env (the last one wins, as in exec).
func lookEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// lookPath resolves name on the child's PATH, as exec would in the child.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("sandbox: command %q: a relative command path cannot be granted; give an absolute one or a name on PATH", name)
		}
		return name, nil
	}
	path, _ := lookEnv(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, name)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("sandbox: command %q: %w on the child's PATH", name, exec.ErrNotFound)
}

// resolve returns the command's absolute path and every grant of the
// child: the system, the command's own files, the declared paths and, under
// Standard without Paths, the guess from its arguments and directory.
func resolve(p Policy, argv, env []string, dir string) (string, []Grant, error) {
	if len(argv) == 0 {
		return "", nil, errors.New("sandbox: no command")
	}
	r := &resolver{p: p, env: env}
	if h, err := os.UserHomeDir(); err == nil {
		r.homes = append(r.homes, filepath.Clean(h))
	}
	if h, ok := lookEnv(env, "HOME"); ok && filepath.IsAbs(h) {
		r.homes = append(r.homes, filepath.Clean(h))
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return "", nil, err
	}
	for _, s := range systemPaths {
		r.add(s, false, "system", true)
	}
	for _, f := range systemFiles {
		if real, err := filepath.EvalSymlinks(f); err == nil && real != f {
			r.add(real, false, "system ("+f+")", true)
		}
	}
	r.command(path, "command", 0)
	for _, ro := range p.ReadOnly {
		r.add(ro, false, "declared read-only", false)
	}
	guess := p.Level == Standard && p.Paths == nil
	for _, rw := range p.Paths {
		r.add(rw, true, "declared", false)
	}
	for _, root := range p.Roots {
		r.add(root, true, "root", false)
	}
	if p.Level == Standard {
		args := argv[1:]
		if p.GuessFrom != nil {
			args = p.GuessFrom
		}
		for _, arg := range args {
			r.argument(arg, guess)
		}
	}
	if dir != "" {
		r.add(dir, guess, "working directory", false)
	}
	r.add(p.Home, true, "private home", false)
	return path, r.rules, nil
}

// add grants path unless it does not exist (a missing declared path is
// listed anyway, so that the report names it). A path already granted
// keeps the stronger right.
func (r *resolver) add(path string, write bool, why string, quietIfMissing bool) {
	path = filepath.Clean(path)
	if _, err := os.Lstat(path); err != nil && quietIfMissing {
		return
	}
	for i, g := range r.rules {
		if g.Path == path {
			if write && !g.Write {
				r.rules[i] = Grant{Path: path, Write: true, Why: why}
			}
			return
		}
	}
	r.rules = append(r.rules, Grant{Path: path, Write: write, Why: why})
}

// command grants the installation of the executable at path: its prefix,
// its symlinks' targets, and the interpreter of a script (one level, and
// through /usr/bin/env).
func (r *resolver) command(path, why string, depth int) {
	r.add(r.prefix(path), false, why, true)
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return
	}
	if real != path {
		r.add(r.prefix(real), false, why+" (symlink target)", true)
	}
	if depth > 0 {
		return
	}
	interp := shebang(real)
	if len(interp) == 0 {
		return
	}
	if filepath.Base(interp[0]) == "env" {
		r.command(interp[0], "interpreter", 1)
		for _, a := range interp[1:] {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
				continue
			}
			if p, err := lookPath(a, r.env); err == nil {
				r.command(p, "interpreter", 1)
			}
			break
		}
		return
	}
	if filepath.IsAbs(interp[0]) {
		r.command(interp[0], "interpreter", 1)
	}
}

// shebang returns the interpreter and its arguments of a script, nil for
// anything else.
func shebang(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 256).ReadSlice('\n')
	if err != nil && len(line) == 0 || !strings.HasPrefix(string(line), "#!") {
		return nil
	}
	return strings.Fields(strings.TrimPrefix(string(line), "#!"))
}

// prefix is the directory to grant for an executable: its installation
// (the parent of a bin directory: /usr, ~/.nvm/versions/node/v22, a
// project's .venv), a version manager's root, or just its directory where
// the parent is a home or / (~/.local/bin, ~/.cargo/bin: their siblings
// hold data and credentials).
func (r *resolver) prefix(path string) string {
	for _, home := range r.homes {
		rel, err := filepath.Rel(home, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, vm := range versionManagers {
			if rel == vm || strings.HasPrefix(rel, vm+"/") {
				return filepath.Join(home, vm)
			}
		}
	}
	dir := filepath.Dir(path)
	if b := filepath.Base(dir); b != "bin" && b != "sbin" {
		return dir
	}
	parent := filepath.Dir(dir)
	if parent == "/" || r.isHomeOrDotDir(parent) {
		return dir
	}
	return parent
}

// isHomeOrDotDir reports whether dir is a home or a directory right under
// one (~/.local, ~/.cargo, ~/go).
func (r *resolver) isHomeOrDotDir(dir string) bool {
	for _, home := range r.homes {
		if dir == home || filepath.Dir(dir) == home {
			return true
		}
	}
	return false
}

// argument grants what one argument names: an absolute directory
// read-write (when dirs: the guess, which Paths replaces), an absolute
// file's project read-only (a script needs its node_modules or virtual
// environment: the program's own files, which declared paths do not
// replace). "--flag=/path" names /path. The root directory is never
// guessed.
func (r *resolver) argument(arg string, dirs bool) {
	var candidates []string
	if filepath.IsAbs(arg) {
		candidates = append(candidates, arg)
	} else if _, v, ok := strings.Cut(arg, "="); ok && filepath.IsAbs(v) {
		candidates = append(candidates, v)
	}
	for _, c := range candidates {
		c = filepath.Clean(c)
		fi, err := os.Stat(c)
		if err != nil || c == "/" {
			continue
		}
		if fi.IsDir() {
			if dirs {
				r.add(c, true, "argument", false)
			}
			continue
		}
		r.add(r.project(c), false, "argument's project", false)
		// Node and Python find a script's modules from its real path.
		if real, err := filepath.EvalSymlinks(c); err == nil && real != c {
			r.add(r.project(real), false, "argument's project (symlink target)", false)
		}
	}
}

// project is the directory of a script's project: the nearest ancestor
// with node_modules or a virtual environment, else the nearest with a
// manifest, else the script's directory; never a home or /.
func (r *resolver) project(file string) string {
	start := filepath.Dir(file)
	manifest := ""
	for dir := start; dir != "/" && !slices.Contains(r.homes, dir); dir = filepath.Dir(dir) {
		for _, m := range projectDeps {
			if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
				return dir
			}
		}
		if manifest == "" {
			for _, m := range projectManifests {
				if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
					manifest = dir
					break
				}
			}
		}
	}
	if manifest != "" {
		return manifest
	}
	return start
}
