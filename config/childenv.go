package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// This file holds what an entry that runs a program shares with
// docs/upstreams.md §1: the child's environment (inherit_env and env), its
// working directory, the program resolved on the child's PATH, and paths
// relative to the configuration file.

const inheritRule = "must be true, false or a list of variable names (a trailing * matches the rest)"

// inheritName is an inherit_env entry: a variable name (validVarName), or
// a prefix of names followed by *.
var inheritName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)

// childEnv returns the environment of a child in os.Environ form, sorted:
// the variables of ctx.Env that inherit_env lets through, then the env
// table, which wins. env values expand ${VAR}, ${VAR:-default} and
// ${file:PATH} (expandValue).
func childEnv(f *fields, ctx entryContext) []string {
	inherit := InheritEnv{Names: DefaultInheritEnv} // docs/upstreams.md §1
	if v, ok := f.get("inherit_env"); ok {
		switch v := v.(type) {
		case bool:
			inherit = InheritEnv{All: v}
		case []any:
			inherit = InheritEnv{}
			for _, it := range v {
				name, ok := it.(string)
				if !ok || !inheritName.MatchString(name) {
					f.problem("inherit_env", inheritRule+", got "+literal(it))
					continue
				}
				inherit.Names = append(inherit.Names, name)
			}
		default:
			f.problem("inherit_env", inheritRule+", got "+literal(v))
		}
	}
	env := map[string]string{}
	for name, value := range ctx.Env {
		if inherit.Allows(name) {
			env[name] = value
		}
	}
	if t := f.sub("env"); t != nil {
		for _, name := range slices.Sorted(maps.Keys(t.table)) {
			raw, _ := t.get(name)
			value, ok := toString(raw)
			switch {
			case !validVarName(name):
				t.problem(name, "is not a variable name: use letters, digits and _, not starting with a digit")
			case !ok:
				t.problem(name, "must be a string, got "+literal(raw))
			default:
				expanded, err := expandValue(value, ctx)
				if err != nil {
					// The message never holds the value: env often holds secrets.
					t.problem(name, err.Error())
					continue
				}
				env[name] = expanded
			}
		}
	}
	out := make([]string, 0, len(env))
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	return out
}

// expandValue expands ${VAR} and ${VAR:-default} from the daemon's
// environment and ${file:PATH} to the file's content with surrounding
// white space trimmed (for secrets, such as systemd credentials). A $ not
// followed by { stays as it is. An unset ${VAR} without a default, or a
// file that cannot be read, is an error that does not show the value.
func expandValue(s string, ctx entryContext) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New("has a ${ without its closing }")
		}
		b.WriteString(s[:i])
		expr := s[i+2 : i+end]
		s = s[i+end+1:]
		if path, ok := strings.CutPrefix(expr, "file:"); ok {
			p := entryPath(path, ctx)
			content, err := os.ReadFile(p)
			if err != nil {
				return "", fmt.Errorf("${file:%s}: cannot read %s: %v", path, p, pathErr(err))
			}
			b.WriteString(strings.TrimSpace(string(content)))
			continue
		}
		name, def, hasDefault := strings.Cut(expr, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("${%s} is not an expansion: use ${VAR}, ${VAR:-default} or ${file:PATH}", expr)
		}
		v, set := ctx.Env[name]
		switch {
		case set && (v != "" || !hasDefault):
			b.WriteString(v)
		case hasDefault:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("uses ${%s}, which is not set in the daemon's environment; set it or write ${%s:-default}", name, name)
		}
	}
}

// pathErr is the reason of a path error, without the path (the caller
// names it).
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// entryPath makes p absolute: ~/ is the daemon's $HOME, and a relative
// path is taken from the configuration file's directory.
func entryPath(p string, ctx entryContext) string {
	if p == "~" {
		p = ctx.Env["HOME"]
	} else if rest, ok := strings.CutPrefix(p, "~/"); ok {
		p = filepath.Join(ctx.Env["HOME"], rest)
	}
	if !filepath.IsAbs(p) {
		base := filepath.Dir(ctx.File)
		if ctx.File == "" {
			base, _ = os.Getwd()
		}
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// childDir reads cwd: the child's working directory, $HOME by default
// (docs/upstreams.md §1), which must be a directory.
func childDir(f *fields, ctx entryContext, env []string) string {
	dir := f.str("cwd", "")
	if dir == "" {
		dir = envValue(env, "HOME")
		if dir == "" {
			dir = ctx.Env["HOME"]
		}
		if dir == "" {
			return "/"
		}
	}
	dir = entryPath(dir, ctx)
	if fi, err := os.Stat(dir); err != nil {
		f.problem("cwd", fmt.Sprintf("the directory %s does not exist or cannot be reached (%v)", dir, pathErr(err)))
	} else if !fi.IsDir() {
		f.problem("cwd", fmt.Sprintf("must be a directory, got the file %s", dir))
	}
	return dir
}

// envValue returns the value of name in an os.Environ-form list.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// resolveProgram finds the program a child runs: a name without / on the
// child's PATH (as execve's callers do), a path with / taken from the
// configuration file's directory when relative. It returns the absolute
// path, or "" after recording a problem under field.
func resolveProgram(f *fields, field, program string, ctx entryContext, env []string) string {
	if program == "" {
		f.problem(field, "must start with the program to run, got an empty string")
		return ""
	}
	if strings.Contains(program, "/") {
		p := entryPath(program, ctx)
		if err := executable(p); err != nil {
			f.problem(field, fmt.Sprintf("cannot run %s: %v", p, err))
			return ""
		}
		return p
	}
	path := envValue(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the cwd
		}
		if p := filepath.Join(dir, program); executable(p) == nil {
			return p
		}
	}
	if path == "" {
		f.problem(field, fmt.Sprintf("%q is not found: the child's PATH is empty; give its absolute path, or let PATH through inherit_env or env", program))
	} else {
		f.problem(field, fmt.Sprintf("%q is not found on the child's PATH (%s); install it or give its absolute path", program, path))
	}
	return ""
}

// executable reports why p cannot be run, or nil.
func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return pathErr(err)
	case fi.IsDir():
		return errors.New("it is a directory")
	case fi.Mode()&0o111 == 0:
		return errors.New("it is not executable (chmod +x)")
	}
	return nil
}
