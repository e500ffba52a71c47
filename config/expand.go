package config

import (
	"os"
	"strings"
)

// The one expander of every value that expands (docs/config.md,
// "Expansions"): the program fields of exec tools and hosted servers
// (command, args, env, env_file, cwd), a server's roots, and the socket
// paths. One grammar everywhere:
//
//	${VAR}           the daemon's variable; unset is an error
//	${VAR:-default}  the variable, or default when it is unset or empty
//	${file:PATH}     the file's content, white space around it trimmed;
//	                 PATH may use ${VAR}
//	${client.cwd}    the client's working directory, kept as written
//	                 until Program.Render
//	$$               a literal $
//
// A $ followed by anything else is itself, so a shell script in args
// ("sh", "-c", "echo $1") reaches its shell as written. Each field allows
// a subset (expansions): ${file:} only where a secret is safe (env), and
// ${client.cwd} only in a hosted server, which starts per client. Anything
// else written ${…} is an error, so a client's own syntax (${env:X},
// ${workspaceFolder}) never reaches a child as text.

// expansions are the forms a field allows besides ${VAR}, ${VAR:-default}
// and $$, which every field allows.
type expansions uint8

const (
	allowFile      expansions = 1 << iota // ${file:PATH}
	allowClientCwd                        // ${client.cwd}
)

// ClientCwd is the expansion that Render replaces with a client's working
// directory.
const ClientCwd = "${client.cwd}"

// expander expands values with one environment and one base for the
// paths of ${file:…}.
type expander struct {
	env map[string]string
	// base is the directory relative ${file:…} paths are taken from (the
	// configuration file's); "" is the working directory.
	base string
	// field names, for messages, the kind of field being expanded where
	// an expansion is refused: "args", "a socket path".
	field string
	// forTool is set for an exec tool's fields, whose refusal of
	// ${client.cwd} says why.
	forTool bool
	// empty collects the ${file:…} paths that held nothing but white
	// space: a secret not written yet, which config check warns about.
	empty []string
}

// expand returns s with its expansions done, or "" and the problem (a
// message without s's value: it may hold a secret).
func (x *expander) expand(s string, allowed expansions) (string, string) {
	if !strings.Contains(s, "$") {
		return s, ""
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), ""
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
		end := closingBrace(s)
		if end < 0 {
			return "", "has an unterminated ${ (write $$ for a literal $)"
		}
		inner := s[2:end]
		s = s[end+1:]
		v, problem := x.one(inner, allowed)
		if problem != "" {
			return "", problem
		}
		b.WriteString(v)
	}
}

// one expands the inside of one ${…}.
func (x *expander) one(inner string, allowed expansions) (string, string) {
	switch {
	case "${"+inner+"}" == ClientCwd:
		if allowed&allowClientCwd == 0 {
			if x.forTool {
				return "", "uses ${client.cwd}, which only a hosted server (mcpServers) has: it starts for a client; an exec tool runs for every client alike"
			}
			return "", "uses ${client.cwd}, which only a hosted server's program fields and roots have"
		}
		return ClientCwd, ""
	case strings.HasPrefix(inner, "file:"):
		if allowed&allowFile == 0 {
			return "", x.fileRefused(inner)
		}
		// The path may use variables: ${file:${CREDENTIALS_DIRECTORY}/token}.
		p, problem := x.expand(strings.TrimPrefix(inner, "file:"), 0)
		if problem != "" {
			return "", problem
		}
		return x.file(p)
	case strings.HasPrefix(inner, "env:") && validVarName(inner[4:]):
		return "", "uses ${" + inner + "}, a client's syntax (VS Code, Cursor); snodod writes it ${" + inner[4:] + "}"
	case inner == "workspaceFolder":
		return "", `uses ${workspaceFolder}, a client's syntax (VS Code, Cursor); snodod writes it ${client.cwd}, with share = "cwd"`
	}
	name, def, hasDefault := strings.Cut(inner, ":-")
	if !validVarName(name) {
		return "", "uses ${" + inner + "}, which snodod does not expand; the expansions are " + expansionList(allowed)
	}
	v, set := x.env[name]
	switch {
	case hasDefault && v == "":
		return x.expand(def, allowed) // a default may use expansions too
	case !set:
		return "", "uses ${" + name + "}, which is not set in the daemon's environment; set it, or write ${" + name + ":-default}"
	}
	return v, ""
}

// closingBrace returns the index of the } that closes the ${ s starts
// with, counting the ${…} nested in it, or -1.
func closingBrace(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "${"):
			depth++
			i++
		case s[i] == '}':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// fileRefused says why ${file:…} is refused in x's field: a secret in a
// process's arguments, or in a path, is readable by every local user
// (docs/security.md).
func (x *expander) fileRefused(inner string) string {
	switch x.field {
	case "command", "args":
		return "uses ${" + inner + "} in " + x.field + ", which every local user can read (a process's command line is in /proc/PID/cmdline); " +
			"pass the secret in env instead, env = { NAME = \"${" + inner + "}\" }, for the program to read there"
	case "cwd", "roots", "env_file":
		return "uses ${" + inner + "} in " + x.field + ", a path that status and logs show: only env values may hold a secret, env = { NAME = \"${" + inner + "}\" }"
	case "url", "tls_ca_file", "client_secret_file", "private_key_file":
		return "uses ${" + inner + "} in " + x.field + ", which status and logs show: only env and headers values may hold a secret, headers = { NAME = \"${" + inner + "}\" }"
	}
	return "uses ${" + inner + "}, which only env values and a remote server's headers may use (a secret anywhere else could be read by other local users)"
}

// file reads a ${file:PATH} secret. Its content is never shown.
func (x *expander) file(p string) (string, string) {
	if p == "" {
		return "", "uses ${file:} without a path"
	}
	full := resolvePath(p, x.env["HOME"], x.base)
	b, err := os.ReadFile(full)
	if err != nil {
		return "", "uses ${file:" + p + "}, which cannot be read: " + full + ": " + pathErr(err).Error()
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		x.empty = append(x.empty, p)
	}
	return v, ""
}

// expansionList names what a field with allowed may use.
func expansionList(allowed expansions) string {
	list := []string{"${VAR}", "${VAR:-default}"}
	if allowed&allowFile != 0 {
		list = append(list, "${file:PATH}")
	}
	if allowed&allowClientCwd != 0 {
		list = append(list, "${client.cwd}")
	}
	return join(append(list, "$$ for a literal $"), "and")
}

// validVarName reports whether n is a variable name a shell can set:
// a letter or _, then letters, digits and _.
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
