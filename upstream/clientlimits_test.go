package upstream

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestClientLimitsDocumented holds docs/views.md's table of client
// limits to clientLimits: the same names, the same numbers, each with a
// source.
func TestClientLimitsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/views.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]int{}
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			in = line == "### Client limits"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("views.md: a client limit row has %d cells, want 3: %s", len(cells), line)
		}
		name := strings.ToLower(strings.Trim(strings.TrimSpace(cells[0]), "`"))
		n, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			t.Errorf("views.md: %s: limit %q", name, cells[1])
		}
		if !strings.Contains(cells[2], "https://") {
			t.Errorf("views.md: %s has no source", name)
		}
		documented[name] = n
	}
	for name, n := range clientLimits {
		if documented[name] != n {
			t.Errorf("%s: %d in the code, %d in docs/views.md", name, n, documented[name])
		}
	}
	for name := range documented {
		if _, ok := clientLimits[name]; !ok {
			t.Errorf("%s: in docs/views.md, not in clientLimits", name)
		}
	}
	if clientLimit(" Cursor-VSCode ") != 80 || clientLimit("claude-code") != 0 {
		t.Error("clientLimit does not match names without regard to case and spaces, or knows claude-code")
	}
}
