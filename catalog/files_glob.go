package catalog

import (
	"path"
	"strings"
)

// matchGlob reports whether rel, a slash-separated path, matches pattern:
// each segment is matched with path.Match (*, ?, [a-z] stay within a
// segment), and a segment ** matches any number of segments, none
// included, so "**/*.md" matches "a.md" and "x/y/a.md". config checks the
// patterns' syntax at load.
func matchGlob(pattern, rel string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(rel, "/"))
}

func matchSegments(pattern, segs []string) bool {
	for len(pattern) > 0 {
		if pattern[0] == "**" {
			for len(pattern) > 1 && pattern[1] == "**" {
				pattern = pattern[1:] // **/** is **, and would only cost time
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegments(pattern[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pattern[0], segs[0]); !ok {
			return false
		}
		pattern, segs = pattern[1:], segs[1:]
	}
	return len(segs) == 0
}
