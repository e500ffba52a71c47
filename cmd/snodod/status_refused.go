package main

import (
	"fmt"
	"slices"
	"strings"
)

// refusedText is a status line's list of refusals by reason, "uid 3,
// capacity 1", in the order of reasons; "" when there were none.
func refusedText[N int64 | uint64](by map[string]N) string {
	reasons := make([]string, 0, len(by))
	for r, n := range by {
		if n > 0 {
			reasons = append(reasons, r)
		}
	}
	slices.Sort(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", strings.ReplaceAll(r, "_", " "), by[r])
	}
	return strings.Join(parts, ", ")
}
