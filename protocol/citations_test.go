package protocol

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// Citations: comments, transcripts and the docs cite the repository's own
// pages by section ("docs/transport.md §12.4", "architecture.md §4.1",
// "protocol.md §14 cases 1, 3 and 47"), and nothing else by number. A
// reader of the repository has its docs/ and nothing more: not the notes
// the project was planned in, not its issue tracker.

// repoDoc is one page of docs/, parsed.
type repoDoc struct {
	name     string
	text     string
	sections map[string]bool // "3", "3.1", …: the numbered headings
	cases    map[int]bool    // the numbered black-box cases; nil without that section
}

var (
	headingRE  = regexp.MustCompile(`(?m)^#{2,6} (\d+(?:\.\d+)*)\.? `)
	caseItemRE = regexp.MustCompile(`(?m)^(\d+)\. `)
)

// parseDoc reads a page's numbered sections, and its cases when it has a
// top-level "Black-box cases" section.
func parseDoc(name, text string) *repoDoc {
	d := &repoDoc{name: name, text: text, sections: map[string]bool{}}
	blackBox := -1
	for _, m := range headingRE.FindAllStringSubmatchIndex(text, -1) {
		number := text[m[2]:m[3]]
		d.sections[number] = true
		if !strings.Contains(number, ".") && strings.HasPrefix(text[m[1]:], "Black-box cases") {
			blackBox = m[1]
		}
	}
	if blackBox >= 0 {
		d.cases = map[int]bool{}
		for _, m := range caseItemRE.FindAllStringSubmatch(text[blackBox:], -1) {
			n, _ := strconv.Atoi(m[1])
			d.cases[n] = true
		}
	}
	return d
}

// loadRepoDocs parses every page of docs/, by file name.
func loadRepoDocs(t *testing.T) map[string]*repoDoc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	docs := map[string]*repoDoc{}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		docs[name] = parseDoc(name, string(raw))
	}
	for _, name := range append(slices.Clone(contractDocs), "architecture.md") {
		if docs[name] == nil || len(docs[name].sections) == 0 {
			t.Fatalf("docs/%s is missing or has no numbered sections", name)
		}
	}
	return docs
}

// A citation: a page's name, then a run of sections, steps, rows and
// cases: "transport.md §4 and §5, rows 1 to 8", "protocol.md §14 cases 1,
// 3 and 47". docs/ before the name is allowed, for when the comments point
// there.
var (
	citationRE = regexp.MustCompile(`(?:docs/)?\b([a-z][a-z0-9-]*)\.md((?:\s*(?:,|;|and|or|to)?\s*(?:§\s?\d+(?:\.\d+)*|steps?\b|rows?\b|cases?\b|\d+\b))+)`)
	tokenRE    = regexp.MustCompile(`§\s?(\d+(?:\.\d+)*)|(steps?|rows?|cases?)\b|(\d+)`)
	bareRE     = regexp.MustCompile(`§\s?(\d+(?:\.\d+)*)`)
	// Protocol versions are not case numbers: "case 20, 2025-06-18".
	versionRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	// A § right after another document's name is that document's: "RFC
	// 9728 §3.1", "OAuth 2.1 §1.5".
	foreignRE = regexp.MustCompile(`(?:RFC\s?\d+|OAuth\s?\d+(?:\.\d+)*)(?:\s*§\s?\d+(?:\.\d+)*\s*(?:,|and|or)?)*\s*$`)
	// docRefRE is a page of docs/ named by path, cited by section or not.
	docRefRE = regexp.MustCompile(`\bdocs/([A-Za-z0-9_-]+\.md)\b`)
	// goFileRE is a Go file a comment names: "encode.go", "daemon/journal.go".
	goFileRE = regexp.MustCompile(`(?:^|[\s(\x60"'])((?:[a-z][a-z0-9_]*/)*[a-z][a-z0-9_]*\.go)\b`)
)

// outsideRE are the ways to cite what a reader of the repository does not
// have. Go's own tracker (go.dev/issue/N) is public and stays citable.
var outsideRE = []*regexp.Regexp{
	regexp.MustCompile(`\bDESIGN\.md\b`),
	regexp.MustCompile(`(?:\.\./)+shared\b|\bshared/(?:spec|research)\b`),
	regexp.MustCompile(`\b(?:research|spec)(?:'s)?\s*§`),
	regexp.MustCompile(`\b[Ii]ssues?\s+#?\d+`),
}

// citation is what a run cites in one page.
type citation struct {
	doc      string
	sections []string
	cases    []int
}

// parseCitations finds the citations in text. With self set (text is one of
// the docs), a § outside any citation cites self.
func parseCitations(text, self string) []citation {
	text = strings.Join(strings.Fields(strings.ReplaceAll(text, "`", "")), " ")
	text = versionRE.ReplaceAllString(text, "<version>")
	var out []citation
	var cited [][]int
	for _, m := range citationRE.FindAllStringSubmatchIndex(text, -1) {
		c := citation{doc: text[m[2]:m[3]] + ".md"}
		mode := "section"
		for _, tok := range tokenRE.FindAllStringSubmatch(text[m[4]:m[5]], -1) {
			switch {
			case tok[1] != "":
				c.sections = append(c.sections, tok[1])
				mode = "section"
			case tok[2] != "":
				mode = strings.TrimSuffix(tok[2], "s")
			case mode == "case":
				n, _ := strconv.Atoi(tok[3])
				c.cases = append(c.cases, n)
			}
		}
		out = append(out, c)
		cited = append(cited, m)
	}
	if self == "" {
		return out
	}
	bare := citation{doc: self}
	for _, m := range bareRE.FindAllStringSubmatchIndex(text, -1) {
		inside := slices.ContainsFunc(cited, func(c []int) bool { return m[0] >= c[0] && m[1] <= c[1] })
		if !inside && !foreignRE.MatchString(text[:m[0]]) {
			bare.sections = append(bare.sections, text[m[2]:m[3]])
		}
	}
	return append(out, bare)
}

// outsideCitations returns what text cites outside the repository.
func outsideCitations(text string) []string {
	text = strings.Join(strings.Fields(text), " ")
	var out []string
	for _, re := range outsideRE {
		out = append(out, re.FindAllString(text, -1)...)
	}
	return out
}

func TestParseCitations(t *testing.T) {
	got := parseCitations("see transport.md §4 and §5, rows 1 to 8; and protocol.md\n§14 cases 1, 3 and 47 (2025-06-18). Also `protocol.md §4.2`, `§5.2`; docs/architecture.md §3.1; RFC 9728 §3.1, §5.1. Bare: §9.", "transport.md")
	want := []citation{
		{doc: "transport.md", sections: []string{"4", "5"}},
		{doc: "protocol.md", sections: []string{"14"}, cases: []int{1, 3, 47}},
		{doc: "protocol.md", sections: []string{"4.2", "5.2"}},
		{doc: "architecture.md", sections: []string{"3.1"}},
		{doc: "transport.md", sections: []string{"9"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].doc != want[i].doc || !slices.Equal(got[i].sections, want[i].sections) || !slices.Equal(got[i].cases, want[i].cases) {
			t.Errorf("citation %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestOutsideCitations(t *testing.T) {
	for text, want := range map[string][]string{
		"DESIGN.md's first shortcut":                                               {"DESIGN.md"},
		"(../shared/research/client-conformance.md)":                               {"../shared"},
		"the contract (shared/spec/upstreams.md)":                                  {"shared/spec"},
		"cut there (research §5.7)":                                                {"research §"},
		"the spec's §4 says":                                                       {"spec's §"},
		"issue 9, bug 10; Issue 20\nitem 1; issues 10 and 12; issue #3":            {"issue 9", "Issue 20", "issues 10", "issue #3"},
		"go.dev/issue/75804, docs/transport.md §12.4, an issue of order, tissue 5": nil,
	} {
		if got := outsideCitations(text); !slices.Equal(got, want) {
			t.Errorf("%q: got %q, want %q", text, got, want)
		}
	}
}

// citedText is one text the test reads, and where it is.
type citedText struct {
	where string // path:line
	text  string
	self  string // the page, for a text of docs/
	isGo  bool   // a Go comment
	dir   string // the directory of a Go comment's file
}

// citedTexts returns every text that may cite the docs: each comment of
// every Go file of the repository (the bench module's included), the
// header of every transcript, the pages of docs/ themselves, and the
// README, Makefile, CI script and deployment files.
func citedTexts(t *testing.T) []citedText {
	t.Helper()
	var out []citedText
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if name := e.Name(); path != moduleRoot && name != ".ci" && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		name := rel(path)
		switch {
		case filepath.Ext(path) == ".go":
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, cg := range f.Comments {
				out = append(out, citedText{where: fmt.Sprintf("%s:%d", name, fset.Position(cg.Pos()).Line), text: cg.Text(), isGo: true, dir: filepath.Dir(path)})
			}
		case filepath.Ext(path) == ".txtar":
			// A transcript's comment (before its first section) names
			// the cases it pins.
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out = append(out, citedText{where: name, text: string(txtar.Parse(raw).Comment)})
		case filepath.Dir(name) == "docs" && filepath.Ext(path) == ".md":
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out = append(out, citedText{where: name, text: string(raw), self: filepath.Base(path)})
		case name == "README.md" || name == "Makefile" || strings.HasPrefix(name, ".ci/") || strings.HasPrefix(name, "deploy/") && !strings.HasSuffix(name, ".go"):
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out = append(out, citedText{where: name, text: string(raw)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goFileExists reports whether a comment in dir names an existing file: a
// bare name in dir itself, a path from dir or from the module root. A path
// whose first element is no directory of the repository is another
// repository's ("mcp/transport.go" of the Go SDK) and is not checked.
func goFileExists(dir, name string) bool {
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(moduleRoot, name)} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	first, _, nested := strings.Cut(name, "/")
	if !nested {
		return false
	}
	if st, err := os.Stat(filepath.Join(moduleRoot, first)); err != nil || !st.IsDir() {
		return true
	}
	return false
}

func TestDocsHaveEveryCitedSection(t *testing.T) {
	docs := loadRepoDocs(t)
	fromGo := 0
	for _, ct := range citedTexts(t) {
		for _, c := range parseCitations(ct.text, ct.self) {
			d := docs[c.doc]
			if d == nil {
				if len(c.sections) > 0 || len(c.cases) > 0 {
					t.Errorf("%s cites %s by section, and docs/ has no %s", ct.where, c.doc, c.doc)
				}
				continue
			}
			for _, s := range c.sections {
				if ct.isGo {
					fromGo++
				}
				if !d.sections[s] {
					t.Errorf("%s cites %s §%s, which docs/%s does not have", ct.where, c.doc, s, c.doc)
				}
			}
			for _, k := range c.cases {
				if !d.cases[k] {
					t.Errorf("%s cites %s case %d, which docs/%s does not have", ct.where, c.doc, k, c.doc)
				}
			}
		}
		for _, m := range docRefRE.FindAllStringSubmatch(ct.text, -1) {
			if docs[m[1]] == nil {
				t.Errorf("%s names docs/%s, which does not exist", ct.where, m[1])
			}
		}
		if ct.isGo {
			for _, m := range goFileRE.FindAllStringSubmatch(ct.text, -1) {
				if !goFileExists(ct.dir, m[1]) {
					t.Errorf("%s names %s, which is neither in its directory nor a path of the repository", ct.where, m[1])
				}
			}
		}
		for _, o := range outsideCitations(ct.text) {
			t.Errorf("%s cites %q, which is not in the repository: cite the docs/ page and section that say it (docs/architecture.md holds the design)", ct.where, o)
		}
	}
	// The comments cite the docs hundreds of times; finding few means the
	// scan broke.
	t.Logf("%d sections cited in Go comments", fromGo)
	if fromGo < 100 {
		t.Fatalf("found %d citations in Go comments, want at least 100", fromGo)
	}
}
