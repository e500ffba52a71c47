package config

import (
	"os"
	"strings"
)

// The expansions of an mcpServers entry's command, args, env values, cwd
// and roots (docs/upstreams.md §1):
//
//	${VAR}           the daemon's variable; unset is an error
//	${VAR:-default}  the variable, or default when it is unset or empty
//	${file:PATH}     the file's content with surrounding white space
//	                 trimmed (secrets, systemd credentials); ~ is $HOME,
//	                 a relative PATH is taken from the configuration
//	                 file's directory
//	${client.cwd}    the client's working directory, kept as written
//	                 until Upstream.Render
//	$$               a literal $
//
// Anything else written ${…} is an error, so a client's own syntax
// (${env:X}, ${workspaceFolder}) is not silently passed to the child.

// expander expands one entry's values, reporting problems to d.
type expander struct {
	ctx entryContext
	d   *serverDecoder
	u   *Upstream
}

// expand returns s with its expansions done; a problem is reported under
// field and the unexpanded text returned.
func (x *expander) expand(field, s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$$"):
			b.WriteByte('$')
			s = s[2:]
			continue
		case !strings.HasPrefix(s, "${"):
			b.WriteByte('$')
			s = s[1:]
			continue
		}
		end := strings.IndexByte(s, '}')
		if end < 0 {
			x.d.problem(*x.u, field, "has an unterminated ${ (write $$ for a literal $)")
			return b.String() + s
		}
		inner := s[2:end]
		s = s[end+1:]
		v, ok := x.one(field, inner)
		if !ok {
			return b.String()
		}
		b.WriteString(v)
	}
}

// one expands the inside of one ${…}.
func (x *expander) one(field, inner string) (string, bool) {
	switch {
	case "${"+inner+"}" == ClientCwd:
		return ClientCwd, true
	case strings.HasPrefix(inner, "file:"):
		return x.file(field, strings.TrimPrefix(inner, "file:"))
	}
	name, def, hasDefault := strings.Cut(inner, ":-")
	if !validVarName(name) {
		x.d.problem(*x.u, field, "uses ${"+inner+"}, which snodod does not expand; the expansions are ${VAR}, ${VAR:-default}, ${file:PATH} and ${client.cwd}")
		return "", false
	}
	v, set := x.ctx.Env[name]
	switch {
	case hasDefault && v == "":
		return def, true
	case !set:
		x.d.problem(*x.u, field, "uses ${"+name+"}, which is not set in the daemon's environment; set it, or write ${"+name+":-default}")
		return "", false
	}
	return v, true
}

// file reads a ${file:PATH} secret. Its content is never shown.
func (x *expander) file(field, p string) (string, bool) {
	if p == "" {
		x.d.problem(*x.u, field, "uses ${file:} without a path")
		return "", false
	}
	full := x.resolve(p)
	b, err := os.ReadFile(full)
	if err != nil {
		x.d.problem(*x.u, field, "uses ${file:"+p+"}, which cannot be read: "+full+": "+pathErr(err).Error())
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// path expands s and makes it absolute: ~ is $HOME, a relative path is
// taken from the configuration file's directory. A path starting with
// ${client.cwd} is absolute once rendered.
func (x *expander) path(field, s string) string {
	s = x.expand(field, s)
	if strings.HasPrefix(s, ClientCwd) {
		return s
	}
	return x.resolve(s)
}

// resolve makes p absolute as entryPath does, relative paths taken from
// the directory of the file the entry came from (an imported file's own).
func (x *expander) resolve(p string) string {
	ctx := x.ctx
	ctx.File = x.u.Source.Name
	return entryPath(p, ctx)
}

func validVarName(n string) bool {
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		return false
	}
	for i := range len(n) {
		if c := n[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
