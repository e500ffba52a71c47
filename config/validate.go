package config

import (
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Key is the configuration key; for an unknown key or variable, the
	// name as written; "" for a problem of the whole file (one that looks
	// like an MCP client's own).
	Key string
	// Message says what is allowed and what was got, e.g.
	// `must be a positive duration, got "0s"`; for an unknown key it is
	// the whole line, with a suggestion when one key is close.
	Message string
	// Source is where the offending value or name came from.
	Source Source
	// Unknown is true when Key names no configuration key.
	Unknown bool
	// Warning is true for a problem that does not stop the configuration
	// from loading (Config.Warnings): `snodod config check` prints it, and
	// the daemon logs it.
	Warning bool
}

// String returns the problem as one line: `<key>: <message>`, followed by
// the variable or flag in parentheses when the value came from one (a
// value from the file needs no pointer: the file is named by the caller).
// An unknown key's line is its message.
func (p Problem) String() string {
	if p.Unknown || p.Key == "" {
		return p.Message
	}
	line := p.Key + ": " + p.Message
	if p.Source.Kind == FromEnv || p.Source.Kind == FromFlag {
		line += " (" + p.Source.String() + ")"
	}
	return line
}

// ValidationError is every problem found in a configuration; Load and
// Check return it (as error) when there is at least one.
type ValidationError struct {
	// File is the configuration file that was read, or "" when none was.
	File string
	// Problems are sorted by key; a key may have several (one per bad
	// list entry).
	Problems []Problem
}

// Error lists the problems, one per line, with no header or trailing
// newline.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// SortProblems sorts problems by key, those of one key in the order they
// came (a problem of the whole file, whose key is "", first), as Load and
// Check report them; it returns problems.
func SortProblems(problems []Problem) []Problem {
	slices.SortStableFunc(problems, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	return problems
}

// rule is what a key allows: the text that says it, in messages and in
// docs/config.md, and the check of a converted value.
type rule struct {
	allowed string
	// bad returns the offending parts of v: v itself, or each offending
	// entry of a list; nil when v is allowed.
	bad func(v any) []any
	// entry, for a list whose entries are judged one by one, converts one
	// raw entry and says whether it is allowed, so that a list with an
	// entry of the wrong type ("bob" among uids) gets one line per bad
	// entry rather than one for the whole list.
	entry func(raw any) bool
}

func scalar(allowed string, ok func(v any) bool) rule {
	return rule{allowed: allowed, bad: func(v any) []any {
		if ok(v) {
			return nil
		}
		return []any{v}
	}}
}

func positiveDuration() rule {
	return scalar("must be a positive duration", func(v any) bool { return v.(time.Duration) > 0 })
}

func positiveInt() rule {
	return scalar("must be a positive integer", func(v any) bool { return v.(int) > 0 })
}

func anyString() rule {
	return scalar("must be a string", func(any) bool { return true })
}

func anyBool() rule {
	return scalar("must be true or false", func(any) bool { return true })
}

func oneOf(values ...string) rule {
	return scalar("must be "+join(quoteAll(values), "or"), func(v any) bool { return slices.Contains(values, v.(string)) })
}

func eachString(allowed string, ok func(string) bool) rule {
	return rule{allowed: allowed, entry: func(raw any) bool {
		s, converted := toString(raw)
		return converted && ok(s)
	}, bad: func(v any) []any {
		var bad []any
		for _, s := range v.([]string) {
			if !ok(s) {
				bad = append(bad, s)
			}
		}
		return bad
	}}
}

func eachInt(allowed string, ok func(int) bool) rule {
	return rule{allowed: allowed, entry: func(raw any) bool {
		n, converted := toInt(raw)
		return converted && ok(n)
	}, bad: func(v any) []any {
		var bad []any
		for _, n := range v.([]int) {
			if !ok(n) {
				bad = append(bad, n)
			}
		}
		return bad
	}}
}

// allVersions are the MCP versions snodod speaks, newest first.
var allVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

func versionsRule() rule {
	return rule{allowed: "may list only " + join(allVersions, "and") + ", each once", bad: func(v any) []any {
		seen := map[string]bool{}
		for _, s := range v.([]string) {
			if !slices.Contains(allVersions, s) || seen[s] {
				return []any{v}
			}
			seen[s] = true
		}
		return nil
	}}
}

// maxSocketPath is the longest Unix socket path Linux binds: sun_path is
// 108 bytes with the terminating NUL. A longer one would fail only at
// listen, with a bare EINVAL.
const maxSocketPath = 107

func socketPath(allowed string) rule {
	return scalar(allowed, func(v any) bool {
		s := v.(string)
		return filepath.IsAbs(s) && len(s) <= maxSocketPath && !strings.HasSuffix(s, "/")
	})
}

func validUID(n int) bool { return n >= 0 && int64(n) <= 4294967294 } // (uid_t)-1 is "no uid"

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535 && p[0] != '+' && p[0] != '-'
}

// plainText reports whether s has no spaces or control characters.
func plainText(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) < 0
}

func validListen(v any) bool {
	s := v.(string)
	if s == "" {
		return true
	}
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		return validUnixListen(path)
	}
	host, port, err := net.SplitHostPort(s)
	return err == nil && validPort(port) && plainText(host) && !strings.Contains(host, "/")
}

func validHTTPPath(v any) bool {
	s := v.(string)
	return strings.HasPrefix(s, "/") && !strings.ContainsAny(s, "?#") && plainText(s)
}

// validOrigin accepts what a browser sends in Origin: scheme://host[:port],
// with no user, path (not even "/"), query or fragment.
func validOrigin(s string) bool {
	u, err := url.Parse(s)
	if err != nil || !plainText(s) {
		return false
	}
	return u.Scheme != "" && u.Opaque == "" && u.User == nil && u.Hostname() != "" &&
		!strings.HasSuffix(u.Host, ":") && (u.Port() == "" || validPort(u.Port())) &&
		u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && !strings.Contains(s, "#")
}

func validWebsite(v any) bool {
	s := v.(string)
	if s == "" {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && plainText(s) && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != ""
}

// join lists items as prose: "a", "a or b", "a, b or c".
func join(items []string, conj string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}

// suggest returns the keys a mistyped name most likely meant: the one key
// within two edits (ignoring case, and - for _), else the keys of other
// sections with the same leaf (at most two), else none.
func suggest(name string) []string {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	var near []string
	best := 3
	for _, s := range specs {
		switch d := distance(n, s.name); {
		case d < best:
			best, near = d, []string{s.name}
		case d == best:
			near = append(near, s.name)
		}
	}
	if len(near) == 1 && best < len(n)/2 {
		return near
	}
	leaf := n[strings.LastIndex(n, ".")+1:]
	var same []string
	for _, s := range specs {
		if strings.HasSuffix(s.name, "."+leaf) && s.name != n {
			same = append(same, s.name)
		}
	}
	if len(same) > 0 && len(same) <= 2 {
		return same
	}
	return nil
}

// didYouMean renders suggestions as a message tail, each through show.
func didYouMean(cands []string, show func(string) string) string {
	if len(cands) == 0 {
		return ""
	}
	shown := make([]string, len(cands))
	for i, c := range cands {
		shown[i] = show(c)
	}
	return "; did you mean " + join(shown, "or") + "?"
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
