package server

import (
	"fmt"
	"regexp"
	"strings"
)

// uriTemplate matches URIs against an RFC 6570 template of simple and
// reserved expansions: each {name} matches one or more characters other
// than "/", each {+name} one or more characters, "/" included (a path
// under a folder). Values are matched as written, percent-encoding kept.
type uriTemplate struct {
	re    *regexp.Regexp
	names []string
}

func compileTemplate(t string) (*uriTemplate, error) {
	var names []string
	re, err := templateRegexp(t, func(expr string) (string, error) {
		name, reserved := strings.CutPrefix(expr, "+")
		if name == "" || strings.ContainsAny(name, "{+#./;?&=,!@|") {
			return "", fmt.Errorf("unsupported expression {%s} in %q: only {name} and {+name} are supported", expr, t)
		}
		names = append(names, name)
		if reserved {
			return "(.+)", nil
		}
		return "([^/]+)", nil
	})
	if err != nil {
		return nil, err
	}
	return &uriTemplate{re: re, names: names}, nil
}

// templateRegexp compiles template t into an anchored regular expression:
// its literal text matched as written, each {expression} by the pattern
// expr returns for the text between the braces. It fails on an unclosed
// {, or with expr's error.
func templateRegexp(t string, expr func(string) (string, error)) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for rest := t; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("unclosed { in %q", t)
		}
		pattern, err := expr(rest[open+1 : open+end])
		if err != nil {
			return nil, err
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		b.WriteString(pattern)
		rest = rest[open+end+1:]
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// match returns the template's variables for uri, or false.
func (t *uriTemplate) match(uri string) (map[string]string, bool) {
	m := t.re.FindStringSubmatch(uri)
	if m == nil {
		return nil, false
	}
	vars := make(map[string]string, len(t.names))
	for i, n := range t.names {
		vars[n] = m[i+1]
	}
	return vars, true
}
