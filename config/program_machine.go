package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What provisioning reads from the machine for a program: the command on
// the child's PATH, the working directory, the env_file. An exec tool's
// are read at every load (the daemon runs the resolved program at each
// call); a hosted server's command and directory only by config check, as
// the daemon reports what fails when it starts the server.

// resolveCommand finds the program a child runs: a name without / on the
// child's PATH (as execve's callers do), a path with / taken from base
// when relative. It returns the absolute path, or "" after recording a
// problem under f.
func resolveCommand(f field, program string, childEnv []string, r programRules) string {
	if strings.Contains(program, "/") {
		p := resolvePath(program, r.env["HOME"], r.base)
		if err := executable(p); err != nil {
			f.problem(fmt.Sprintf("cannot run %s: %v", p, err))
			return ""
		}
		return p
	}
	path := envValue(childEnv, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the cwd
		}
		if p := filepath.Join(dir, program); executable(p) == nil {
			return p
		}
	}
	if path == "" {
		f.problem(fmt.Sprintf("%q is not found: the child's PATH is empty; give its absolute path, or let PATH through inherit_env or env", program))
	} else {
		f.problem(fmt.Sprintf("%q is not found on the child's PATH (%s); install it, or give its absolute path (a daemon started by systemd has a shorter PATH than a login shell)", program, path))
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

// checkDir records under f why dir cannot be a working directory.
func checkDir(f field, dir string) {
	if fi, err := os.Stat(dir); err != nil {
		f.problem(fmt.Sprintf("the directory %s does not exist or cannot be reached (%v)", dir, pathErr(err)))
	} else if !fi.IsDir() {
		f.problem(fmt.Sprintf("must be a directory, got the file %s", dir))
	}
}

// maxEnvFileBytes bounds an env_file: it holds variables, not data.
const maxEnvFileBytes = 1 << 20

// readEnvFile adds the variables of a file of NAME=VALUE lines to env, as
// VS Code and Cursor read envFile: blank lines and lines starting with #
// are skipped, "export " before a name is allowed, and a value in single
// or double quotes is taken without them (\n, \" and \\ read in double
// quotes). It returns the problem, without any value (they are secrets).
func readEnvFile(path string, env map[string]string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "cannot read " + path + ": " + pathErr(err).Error()
	}
	if len(b) > maxEnvFileBytes {
		return fmt.Sprintf("%s holds %d bytes, more than the %d an env_file may", path, len(b), maxEnvFileBytes)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxEnvFileBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		name = strings.TrimSpace(name)
		if !ok || !validVarName(name) {
			return fmt.Sprintf("line %d of %s is not NAME=VALUE", n, path)
		}
		value = strings.TrimSpace(value)
		switch {
		case len(value) >= 2 && value[0] == '\'' && value[len(value)-1] == '\'':
			value = value[1 : len(value)-1]
		case len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"':
			if v, err := strconv.Unquote(value); err == nil {
				value = v
			} else {
				value = value[1 : len(value)-1]
			}
		}
		env[name] = value
	}
	return ""
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
