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
	var b strings.Builder
	var names []string
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
		name := rest[open+1 : open+end]
		name, reserved := strings.CutPrefix(name, "+")
		if name == "" || strings.ContainsAny(name, "{+#./;?&=,!@|") {
			return nil, fmt.Errorf("unsupported expression {%s} in %q: only {name} and {+name} are supported", rest[open+1:open+end], t)
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		if reserved {
			b.WriteString("(.+)")
		} else {
			b.WriteString("([^/]+)")
		}
		names = append(names, name)
		rest = rest[open+end+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err
	}
	return &uriTemplate{re: re, names: names}, nil
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
