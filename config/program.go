package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// This file holds what every entry that runs a program shares, exec tools
// ([tools.NAME]) and hosted servers ([mcpServers.NAME]) alike: the fields
// (programEntry), decoded by one engine (entry.go), expanded by one
// expander (expand.go), and the Program they make, rendered for a child
// by one Render (docs/config.md, "Programs").

// programEntry is the program of an entry as written.
type programEntry struct {
	// Command is the program alone ("npx", with Args), or the program and
	// its first arguments (["rg", "--", "{{pattern}}"]).
	Command commandLine `key:"command"`
	Args    []string    `key:"args"`
	Env     envTable    `key:"env"`
	// EnvFile is a file of NAME=VALUE lines added to Env (env wins), as
	// VS Code and Cursor write envFile.
	EnvFile    *string    `key:"env_file,alias=envFile"`
	InheritEnv InheritEnv `key:"inherit_env"`
	Cwd        *string    `key:"cwd"`
	// Sandbox is the entry's own sandbox, over [sandbox] (sandbox.go).
	Sandbox entrySandbox `key:"sandbox"`
}

func (p *programEntry) setDefaults() { p.InheritEnv = InheritEnv{Names: DefaultInheritEnv} }

// Program is how a child is started, expanded: the same for an exec tool
// and a hosted server. Env values are secrets: nothing in this package
// prints or logs them.
type Program struct {
	// Command is the program, executed directly, never through a shell.
	Command string
	// Args are its arguments.
	Args []string
	// Env is set in the child's environment over the inherited variables;
	// it holds env_file's variables too (env wins).
	Env map[string]string
	// InheritEnv says which of the daemon's variables the child gets.
	InheritEnv InheritEnv
	// Cwd is the working directory, absolute (or starting with
	// ${client.cwd}); "" means the entry's default.
	Cwd string
}

// InheritEnv is which variables of the daemon's environment a child gets.
type InheritEnv struct {
	// All passes every variable.
	All bool
	// Names are the variables passed when All is false; a name ending in
	// "*" matches every variable with that prefix.
	Names []string
}

// DefaultInheritEnv is the allow-list a child gets when inherit_env is
// not set.
var DefaultInheritEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_*", "TZ", "TMPDIR", "XDG_*"}

// Allows reports whether the variable name is inherited.
func (ie InheritEnv) Allows(name string) bool {
	if ie.All {
		return true
	}
	for _, n := range ie.Names {
		if p, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(name, p) || n == name {
			return true
		}
	}
	return false
}

// inheritName is an inherit_env entry: a variable name, or a prefix of
// names followed by *.
var inheritName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)

const inheritRule = "must be true (every variable), false (none) or a list of variable names (a trailing * matches a prefix)"

func (ie *InheritEnv) decodeEntry(f field, raw any) {
	switch v := raw.(type) {
	case bool:
		*ie = InheritEnv{All: v, Names: []string{}}
		return
	case []any:
		names := []string{}
		for _, it := range v {
			name, ok := it.(string)
			if !ok || !inheritName.MatchString(name) {
				f.problem(inheritRule + ", got " + literal(it))
				continue
			}
			names = append(names, name)
		}
		*ie = InheritEnv{Names: names}
		return
	}
	f.problem(inheritRule + ", got " + literal(raw))
}

// commandLine is the command field: a string, or a list of strings.
type commandLine struct {
	given bool
	words []string // the program, then the list's other elements
	list  bool
}

func (c *commandLine) decodeEntry(f field, raw any) {
	*c = commandLine{given: true} // given, if wrong: its problem is said once
	if s, ok := raw.(string); ok {
		if strings.TrimSpace(s) == "" {
			f.problem("must name the program to run, got " + literal(s))
			return
		}
		c.words = []string{s}
		return
	}
	words, ok := stringList(raw)
	switch {
	case !ok:
		f.problem(`must be the program (a string, with args) or the program and its arguments (a list of strings), got ` + literal(raw))
	case len(words) == 0 || strings.TrimSpace(words[0]) == "":
		f.problem("must name the program to run, got " + literal(raw))
	default:
		*c = commandLine{given: true, words: words, list: true}
	}
}

// envTable is the env field: variable names and their values as written.
// Its messages never show a value: env holds secrets.
type envTable map[string]string

func (e *envTable) decodeEntry(f field, raw any) {
	table, ok := raw.(map[string]any)
	if !ok {
		f.problem(`must be a table of variables, such as { TOKEN = "${file:~/.secrets/token}" }, got ` + kindOfValue(raw))
		return
	}
	*e = envTable{}
	for _, name := range slices.Sorted(maps.Keys(table)) {
		v := f.child(name)
		s, ok := table[name].(string)
		switch {
		case !validVarName(name):
			v.problem("is not a variable name: use letters, digits and _, not starting with a digit")
		case !ok:
			v.problem("must be a string, got " + kindOfValue(table[name]))
		default:
			(*e)[name] = s
		}
	}
}

// programRules say what an entry's program may use.
type programRules struct {
	// server is set for a hosted server: ${client.cwd} is allowed, and
	// the machine is looked at only by config check (the daemon reports
	// what fails when it starts the server).
	server bool
	// check is set by config check: the command is looked up and the
	// working directory stat'ed for every entry.
	check bool
	// env is the daemon's environment; base the directory relative paths
	// are taken from (the file the entry came from).
	env  map[string]string
	base string
}

// provision expands p, reads its env_file, and makes the paths absolute;
// machine says to look up the command and stat the directory (which a
// server's entry does only in config check). It records every problem
// under f and returns the Program as far as it could be made.
func (p *programEntry) provision(f field, r programRules) Program {
	prog := Program{InheritEnv: p.InheritEnv, Env: map[string]string{}}
	x := &expander{env: r.env, base: r.base, forTool: !r.server}
	argv := func(name string) expansions {
		x.field = name
		if r.server {
			return allowClientCwd
		}
		return 0
	}
	// Each element once: command's (its first the program, the others
	// arguments), then args'.
	for i, a := range slices.Concat(p.Command.words, p.Args) {
		name := "command"
		if i >= len(p.Command.words) {
			name = "args"
		}
		v, problem := x.expand(a, argv(name))
		if problem != "" {
			f.child(name).problem(problem)
		}
		if i == 0 && len(p.Command.words) > 0 {
			prog.Command = v
		} else {
			prog.Args = append(prog.Args, v)
		}
	}
	if p.EnvFile != nil {
		x.field = "env_file"
		path, problem := x.expand(*p.EnvFile, 0)
		if strings.Contains(*p.EnvFile, ClientCwd) {
			problem = "cannot use ${client.cwd}: the file is read when the configuration loads, once for every client; give its path"
		}
		if problem == "" && strings.TrimSpace(path) == "" {
			problem = "must be a file's path, got " + literal(*p.EnvFile)
		}
		if problem != "" {
			f.child("env_file").problem(problem)
		} else if err := readEnvFile(resolvePath(path, r.env["HOME"], r.base), prog.Env); err != "" {
			f.child("env_file").problem(err)
		}
	}
	x.field = "env"
	envAllowed := allowFile
	if r.server {
		envAllowed |= allowClientCwd
	}
	for _, name := range slices.Sorted(maps.Keys(p.Env)) {
		v, problem := x.expand(p.Env[name], envAllowed)
		if problem != "" {
			f.child("env").child(name).problem(problem) // the message never holds the value
			continue
		}
		for _, empty := range x.empty {
			f.child("env").child(name).warn("uses ${file:" + empty + "}, which is empty: write the secret into it")
		}
		x.empty = nil
		prog.Env[name] = v
	}
	if p.Cwd != nil {
		dir, problem := x.expand(*p.Cwd, argv("cwd"))
		switch {
		case problem != "":
			f.child("cwd").problem(problem)
		case strings.TrimSpace(dir) == "":
			f.child("cwd").problem("must be a directory's path, got " + literal(*p.Cwd))
		case strings.HasPrefix(dir, ClientCwd):
			prog.Cwd = dir
		default:
			prog.Cwd = resolvePath(dir, r.env["HOME"], r.base)
		}
	}
	return prog
}

// validate checks p's shape as a whole: a command given, and a command
// string that is the program alone.
func (p *programEntry) validate(f field) {
	c := f.child("command")
	switch {
	case !p.Command.given:
		c.problem(`is required: the program to run, such as "npx" (with args = […]), or the program and its arguments, such as ["rg", "--", "{{pattern}}"]`)
	case p.shellLine():
		s := p.Command.words[0]
		parts := strings.Fields(s)
		args := make([]string, len(parts)-1)
		for i, a := range parts[1:] {
			args[i] = quote(a)
		}
		c.problem(fmt.Sprintf("must be the program alone (it is never run through a shell), got %s; write command = %s and args = [%s]",
			quote(s), quote(parts[0]), strings.Join(args, ", ")))
	}
}

// shellLine reports whether the command is a string that holds a whole
// command line, and no args: written for a shell, which snodod never runs.
// Validation says how to split it; provisioning does not look it up.
func (p *programEntry) shellLine() bool {
	return len(p.Command.words) > 0 && !p.Command.list && p.Args == nil && strings.ContainsAny(strings.TrimSpace(p.Command.words[0]), " \t")
}

// UsesClientCwd reports whether the program's command, arguments,
// environment or working directory use ${client.cwd}.
func (p *Program) UsesClientCwd() bool {
	has := func(s string) bool { return strings.Contains(s, ClientCwd) }
	return has(p.Command) || has(p.Cwd) || slices.ContainsFunc(p.Args, has) || slices.ContainsFunc(slices.Collect(maps.Values(p.Env)), has)
}

// Rendered is a program for one child, ${client.cwd} replaced.
type Rendered struct {
	Command string
	Args    []string
	// Env is the child's whole environment, KEY=VALUE, sorted: the
	// inherited variables, then Env over them.
	Env []string
	// Dir is the working directory.
	Dir   string
	Roots []string
}

// Render returns the program of a child started for a client whose
// working directory is cwd, with daemonEnv (os.Environ form) as the
// daemon's environment; defaultDir is the working directory when Cwd is
// "".
func (p *Program) Render(cwd, defaultDir string, daemonEnv []string) Rendered {
	sub := func(s string) string { return strings.ReplaceAll(s, ClientCwd, cwd) }
	r := Rendered{Command: sub(p.Command), Args: make([]string, len(p.Args)), Dir: defaultDir}
	for i, a := range p.Args {
		r.Args[i] = sub(a)
	}
	env := map[string]string{}
	for _, kv := range daemonEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && p.InheritEnv.Allows(k) {
			env[k] = v
		}
	}
	for k, v := range p.Env {
		env[k] = sub(v)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		r.Env = append(r.Env, k+"="+env[k])
	}
	if p.Cwd != "" {
		r.Dir = sub(p.Cwd)
	}
	return r
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
