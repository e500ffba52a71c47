package oauth

import (
	"net/http"
	"strings"
)

// Challenge is one challenge of a WWW-Authenticate header (RFC 9110
// §11.6.1): its scheme ("Bearer", "DPoP") and its auth-params, their names
// lowercased, or its token68.
type Challenge struct {
	Scheme  string
	Params  map[string]string
	Token68 string
}

// ResourceMetadata is the resource_metadata parameter: the URL of the
// protected resource metadata (RFC 9728 §5.1), "" when absent.
func (c *Challenge) ResourceMetadata() string { return c.param("resource_metadata") }

// Scope is the scope parameter split on spaces (RFC 6750 §3), nil when
// absent or empty.
func (c *Challenge) Scope() []string {
	if s := strings.Fields(c.param("scope")); len(s) > 0 {
		return s
	}
	return nil
}

// Error is the error parameter: "invalid_token", "insufficient_scope",
// "use_dpop_nonce" (RFC 9449 §9), ...
func (c *Challenge) Error() string { return c.param("error") }

func (c *Challenge) param(name string) string {
	if c == nil {
		return ""
	}
	return c.Params[name]
}

// ParseChallenges parses every WWW-Authenticate field of h. It is lenient
// where servers are sloppy (spaces around "=", missing separators between
// parameters) and never fails: what cannot be read is skipped.
func ParseChallenges(h http.Header) []Challenge {
	var all []Challenge
	for _, v := range h.Values("Www-Authenticate") {
		all = append(all, parseChallenges(v)...)
	}
	return all
}

// findChallenge returns the first challenge whose scheme is one of schemes
// (compared case-insensitively, RFC 9110 §11.1), nil when none is.
func findChallenge(cs []Challenge, schemes ...string) *Challenge {
	for i := range cs {
		for _, s := range schemes {
			if strings.EqualFold(cs[i].Scheme, s) {
				return &cs[i]
			}
		}
	}
	return nil
}

// parseChallenges reads one field value: a comma-separated list of
// challenges, each a scheme followed by a token68 or comma-separated
// auth-params. A comma ends the challenge when what follows it is not
// "name=".
func parseChallenges(s string) []Challenge {
	var out []Challenge
	p := challengeParser{s: s}
	for {
		p.skip(" \t,")
		if p.done() {
			return out
		}
		scheme := p.token()
		if scheme == "" {
			p.i++ // not a token character: skip it
			continue
		}
		c := Challenge{Scheme: scheme, Params: map[string]string{}}
		first := true
		for {
			mark := p.i
			p.skip(" \t")
			if p.done() {
				break
			}
			if p.s[p.i] == ',' {
				p.i++
				p.skip(" \t,")
				if !p.atParam() {
					break // the next challenge
				}
			} else if !first && !p.atParam() {
				p.i = mark
				break
			}
			if p.atParam() {
				name := strings.ToLower(p.token())
				p.skip(" \t")
				p.i++ // '='
				p.skip(" \t")
				val := p.value()
				if _, dup := c.Params[name]; !dup {
					c.Params[name] = val
				}
			} else if first {
				c.Token68 = p.token68()
				if c.Token68 == "" {
					p.i = mark
					break
				}
			}
			first = false
		}
		out = append(out, c)
	}
}

type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) done() bool { return p.i >= len(p.s) }

func (p *challengeParser) skip(chars string) {
	for p.i < len(p.s) && strings.IndexByte(chars, p.s[p.i]) >= 0 {
		p.i++
	}
}

// atParam reports whether the input continues with token BWS "=" and then
// not another "=" (which would make it a token68's padding).
func (p *challengeParser) atParam() bool {
	j := p.i
	for j < len(p.s) && isTokenChar(p.s[j]) {
		j++
	}
	if j == p.i {
		return false
	}
	for j < len(p.s) && (p.s[j] == ' ' || p.s[j] == '\t') {
		j++
	}
	if j >= len(p.s) || p.s[j] != '=' {
		return false
	}
	return j+1 >= len(p.s) || p.s[j+1] != '='
}

func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *challengeParser) token68() string {
	start := p.i
	for p.i < len(p.s) && (isAlnum(p.s[p.i]) || strings.IndexByte("-._~+/", p.s[p.i]) >= 0) {
		p.i++
	}
	for p.i < len(p.s) && p.s[p.i] == '=' {
		p.i++
	}
	return p.s[start:p.i]
}

// value reads a token or a quoted-string, undoing its backslash escapes.
func (p *challengeParser) value() string {
	if p.done() || p.s[p.i] != '"' {
		return p.token()
	}
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return b.String()
		case c == '\\' && p.i < len(p.s):
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String() // unterminated: take what there is
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isTokenChar reports whether c is a tchar (RFC 9110 §5.6.2).
func isTokenChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
