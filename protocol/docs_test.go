package protocol

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The checks that keep docs/ true to the code: the repository explains its
// own wire contract and its own design. They live here because this
// package owns the wire's vocabulary (the error codes and the Err*
// values); the other packages are read as source text, never imported, so
// no arrow points upward.
//
//   - TestDocsNameEveryClientMessage: every message the code writes to a
//     client appears verbatim in docs/transport.md or docs/protocol.md.
//   - TestDocsHaveEveryCitedSection (citations_test.go): every section
//     (and case) of a page of docs/ that a Go comment, a transcript's
//     header or the docs themselves cite exists, and nothing cites what
//     is not in the repository.

const moduleRoot = ".."

// contractDocs are the two files, by the name comments cite them with.
var contractDocs = []string{"transport.md", "protocol.md"}

// messageDirs are the packages whose error messages reach the wire.
var messageDirs = []string{".", "../server", "../transport/stdio", "../transport/http"}

// resultTexts are client-visible texts that are not error messages, so the
// source scan below does not find them: a tool's argument-validation
// failure, written as an isError result or as data.detail
// (server/schema.go).
var resultTexts = []string{"Missing required arguments: ", "Invalid arguments: "}

// loadContractDocs returns the two files of the wire contract, each with
// its black-box cases.
func loadContractDocs(t *testing.T) map[string]*repoDoc {
	t.Helper()
	docs := map[string]*repoDoc{}
	for _, name := range contractDocs {
		raw, err := os.ReadFile(filepath.Join(moduleRoot, "docs", name))
		if err != nil {
			t.Fatalf("the wire contract must live in the repository: %v", err)
		}
		d := parseDoc(name, string(raw))
		if d.cases == nil {
			t.Fatalf("docs/%s has no \"Black-box cases\" section", name)
		}
		docs[name] = d
	}
	return docs
}

func TestDocsNameEveryClientMessage(t *testing.T) {
	docs := loadContractDocs(t)
	all := docs["transport.md"].text + "\n" + docs["protocol.md"].text

	sc := newSourceScan(t)
	for _, dir := range messageDirs {
		sc.parseDir(dir)
	}
	messages := sc.messages()
	// A scan that found nothing would pass vacuously.
	for _, known := range []string{"Parse error", "Unknown tool:", "Session closed by server", "Invalid pagination cursor", "io.modelcontextprotocol/protocolVersion must be a string"} {
		if !slices.Contains(messages, known) {
			t.Fatalf("the source scan did not find the message %q; it no longer sees how messages are written", known)
		}
	}
	if len(messages) < 60 {
		t.Fatalf("the source scan found only %d messages", len(messages))
	}
	t.Logf("%d message fragments found in %v", len(messages), messageDirs)
	for _, text := range resultTexts {
		messages = append(messages, strings.TrimSpace(text))
	}
	for _, msg := range messages {
		if !strings.Contains(all, msg) {
			t.Errorf("%q is written to clients but appears in neither docs/transport.md nor docs/protocol.md", msg)
		}
	}
	for name, code := range sc.codes() {
		if !strings.Contains(all, code) {
			t.Errorf("error code %s (%s) appears in neither docs/transport.md nor docs/protocol.md", code, name)
		}
	}
}

// sourceScan reads Go sources for the messages they write to clients.
type sourceScan struct {
	t    *testing.T
	fset *token.FileSet
	// consts holds every string or integer constant declaration by package
	// name and constant name, to resolve message expressions.
	consts map[string]map[string]ast.Expr
	// found are the message expressions, with their package.
	found []pkgExpr
}

type pkgExpr struct {
	pkg  string
	expr ast.Expr
}

func newSourceScan(t *testing.T) *sourceScan {
	return &sourceScan{t: t, fset: token.NewFileSet(), consts: map[string]map[string]ast.Expr{}}
}

func (sc *sourceScan) parseDir(dir string) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		sc.t.Fatalf("no Go files in %s: %v", dir, err)
	}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(sc.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			sc.t.Fatal(err)
		}
		sc.collect(f)
	}
}

// collect records f's constants and the messages it writes: the Message of
// every Error literal (Error in this package, protocol.Error elsewhere),
// the argument of every invalidParams call (the -32602 helper of protocol
// and server), and the Reason of every literal (the reason of a
// notifications/cancelled snodod sends).
func (sc *sourceScan) collect(f *ast.File) {
	pkg := f.Name.Name
	if sc.consts[pkg] == nil {
		sc.consts[pkg] = map[string]ast.Expr{}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok == token.CONST {
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							sc.consts[pkg][name.Name] = vs.Values[i]
						}
					}
				}
			}
		case *ast.CompositeLit:
			for _, elt := range n.Elts {
				kv, ok := elt.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				switch {
				case key == nil:
				case key.Name == "Message" && isErrorType(n.Type):
					sc.found = append(sc.found, pkgExpr{pkg, kv.Value})
				case key.Name == "Reason":
					sc.found = append(sc.found, pkgExpr{pkg, kv.Value})
				}
			}
		case *ast.CallExpr:
			if fn, ok := n.Fun.(*ast.Ident); ok && fn.Name == "invalidParams" && len(n.Args) == 1 {
				sc.found = append(sc.found, pkgExpr{pkg, n.Args[0]})
			}
		}
		return true
	})
}

func isErrorType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Error"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "protocol" && e.Sel.Name == "Error"
	}
	return false
}

// messages returns the constant fragments of every message found, trimmed
// of surrounding spaces: "Method not found: " + method gives "Method not
// found:". Fragments are sorted and unique.
func (sc *sourceScan) messages() []string {
	var out []string
	for _, f := range sc.found {
		for _, frag := range sc.fragments(f.pkg, f.expr, 0) {
			if frag = strings.TrimSpace(frag); frag != "" {
				out = append(out, frag)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fragments evaluates a string expression as far as constants go: each run
// of constant text is one fragment, and anything not constant (a variable,
// a call) splits them.
func (sc *sourceScan) fragments(pkg string, e ast.Expr, depth int) []string {
	if depth > 20 {
		return nil
	}
	var parts []string // constant runs; "" marks a hole
	var walk func(pkg string, e ast.Expr)
	add := func(s string, hole bool) {
		switch {
		case hole:
			parts = append(parts, "")
		case len(parts) > 0 && parts[len(parts)-1] != "":
			parts[len(parts)-1] += s
		default:
			parts = append(parts, s)
		}
	}
	walk = func(pkg string, e ast.Expr) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				if err == nil {
					add(s, false)
					return
				}
			}
		case *ast.ParenExpr:
			walk(pkg, e.X)
			return
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				walk(pkg, e.X)
				walk(pkg, e.Y)
				return
			}
		case *ast.Ident:
			if v, ok := sc.consts[pkg][e.Name]; ok {
				for i, frag := range sc.fragments(pkg, v, depth+1) {
					if i > 0 {
						add("", true)
					}
					add(frag, false)
				}
				return
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if v, ok := sc.consts[x.Name][e.Sel.Name]; ok {
					for i, frag := range sc.fragments(x.Name, v, depth+1) {
						if i > 0 {
							add("", true)
						}
						add(frag, false)
					}
					return
				}
			}
		}
		add("", true)
	}
	walk(pkg, e)
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// codes returns the JSON-RPC and MCP error codes (the Code constants of
// this package) by name, as their decimal text.
func (sc *sourceScan) codes() map[string]string {
	out := map[string]string{}
	for name, v := range sc.consts["protocol"] {
		if !strings.HasPrefix(name, "Code") {
			continue
		}
		var b bytes.Buffer
		if err := printer.Fprint(&b, sc.fset, v); err != nil {
			sc.t.Fatal(err)
		}
		out[name] = b.String()
	}
	if len(out) < 9 {
		sc.t.Fatalf("found %d error codes, want at least 9", len(out))
	}
	return out
}

// rel names path from the module root, as a reader looks for it.
func rel(path string) string {
	if r, err := filepath.Rel(moduleRoot, path); err == nil {
		return r
	}
	return path
}
