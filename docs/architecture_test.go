// Package docs holds the repository's pages; its test holds
// architecture.md's package table (§1) to the code.
package docs

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/snodod/snodod/"

// row is one row of the package table: a package, and the packages of the
// module it may import.
type row struct {
	pkg     string
	imports []string
	line    int
}

// packageTable reads the table of architecture.md §1.
func packageTable(t *testing.T) []row {
	t.Helper()
	raw, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	in := false
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.HasPrefix(line, "## 1. Packages")
			continue
		case !in || !strings.HasPrefix(line, "| `"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("architecture.md:%d: a row of the package table has %d cells, want 3 (package, holds, imports): %s", i+1, len(cells), line)
		}
		r := row{pkg: strings.TrimSuffix(strings.Trim(strings.TrimSpace(cells[0]), "`"), "/"), line: i + 1}
		if imports := strings.TrimSpace(cells[2]); imports != "—" {
			for _, imp := range strings.Split(imports, ",") {
				r.imports = append(r.imports, strings.Trim(strings.TrimSpace(imp), "`"))
			}
		}
		rows = append(rows, r)
	}
	if len(rows) < 20 {
		t.Fatalf("architecture.md §1 has %d rows: the table was not found", len(rows))
	}
	return rows
}

// moduleImports returns every package of the module, as `go list ./...`
// lists it, with the packages of the module its non-test files import;
// paths are relative to the module ("daemon/control").
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the packages: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			t.Fatalf("go list printed %q, outside the module", fields[0])
		}
		imports := []string{}
		for _, imp := range fields[1:] {
			if own, ok := strings.CutPrefix(imp, module); ok {
				imports = append(imports, own)
			}
		}
		pkgs[pkg] = imports
	}
	return pkgs
}

// TestPackageTable: architecture.md §1 has a row for every package and no
// other, each row allows only packages of rows above it, and a package
// imports exactly what its row allows, no more (an arrow the design does
// not have) and no less (a row that no longer says what the code does).
func TestPackageTable(t *testing.T) {
	rows := packageTable(t)
	pkgs := moduleImports(t)
	above := map[string]bool{}
	for _, r := range rows {
		imports, ok := pkgs[r.pkg]
		switch {
		case above[r.pkg]:
			t.Errorf("architecture.md:%d: %s has a second row", r.line, r.pkg)
			continue
		case !ok:
			t.Errorf("architecture.md:%d: %s is not a package of the module (go list ./...)", r.line, r.pkg)
		}
		for _, imp := range r.imports {
			if !above[imp] {
				t.Errorf("architecture.md:%d: %s may import %s, which is not in a row above it: the table's order is its layering", r.line, r.pkg, imp)
			}
		}
		if ok {
			for _, imp := range imports {
				if !slices.Contains(r.imports, imp) {
					t.Errorf("%s imports %s, which its row (architecture.md:%d) does not allow: move the code, or change the design and the row", r.pkg, imp, r.line)
				}
			}
			for _, imp := range r.imports {
				if !slices.Contains(imports, imp) {
					t.Errorf("architecture.md:%d: %s's row allows %s, which it does not import: the row must say what the code does", r.line, r.pkg, imp)
				}
			}
		}
		above[r.pkg] = true
	}
	for pkg := range pkgs {
		if !above[pkg] {
			t.Errorf("%s has no row in architecture.md §1", pkg)
		}
	}
}
