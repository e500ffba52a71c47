package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteSection: the section is added at the end of the page, and a
// later run's replaces it, the rest of the page kept.
func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.md")
	if err := os.WriteFile(path, []byte("# Page\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"## Remote\n\nfirst\n", "## Remote\n\nsecond\n"} {
		if err := writeSection(path, page); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	want := "# Page\n\ntext\n\n" + sectionStart + "\n## Remote\n\nsecond\n" + sectionEnd + "\n"
	if string(b) != want || strings.Contains(string(b), "first") {
		t.Errorf("the page:\n%s", b)
	}
}
