package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmbeddingDoc builds the program of docs/embedding.md against this
// checkout, so the document cannot drift from the API.
func TestEmbeddingDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	doc, err := os.ReadFile("../docs/embedding.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```go\n")
	program, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("docs/embedding.md has no Go program")
	}
	if n := strings.Count(program, "\n"); n > 60 {
		t.Errorf("the program has %d lines; it is meant to be short", n)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"main.go": program,
		"go.mod":  "module example.com/weather\n\ngo 1.26.0\n\nrequire github.com/snodod/snodod v0.0.0\n\nreplace github.com/snodod/snodod => " + repo + "\n",
		"go.sum":  string(sum),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the program of docs/embedding.md does not build: %v\n%s", err, out)
	}
}
