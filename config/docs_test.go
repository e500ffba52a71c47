package config

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// update rewrites docs/config.md's key table from Keys:
//
//	go test ./config -run TestDocsTable -update
var update = flag.Bool("update", false, "rewrite the key table in docs/config.md from Keys()")

const (
	docsPath   = "../docs/config.md"
	tableBegin = "<!-- keys:begin -->"
	tableEnd   = "<!-- keys:end -->"
)

var tableHeader = []string{"Key", "Type", "Default", "Environment variable", "Flag", "Description", "Validation"}

// TestDocsTable compares the reference table in docs/config.md with Keys()
// in both directions, every column, so neither can change alone.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if start < 0 || end < start {
		t.Fatalf("%s lacks the %s … %s markers around the key table", docsPath, tableBegin, tableEnd)
	}
	if *update {
		doc = doc[:start+len(tableBegin)] + "\n" + renderTable(Keys()) + doc[end:]
		if err := os.WriteFile(docsPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	rows, err := parseTable(doc[start+len(tableBegin) : end])
	if err != nil {
		t.Fatalf("%s: %v", docsPath, err)
	}
	for _, d := range compareKeys(rows, Keys()) {
		t.Error(d)
	}
}

// TestCompareKeysFindsDrift proves the docs check fails when a key exists
// on one side only or a column differs.
func TestCompareKeysFindsDrift(t *testing.T) {
	code := Keys()
	doc := slices.Clone(code[1:]) // the first key is missing from the docs
	doc = append(doc, Key{Name: "session.extra", Type: "integer", Default: "1", Env: "SNODOD_SESSION__EXTRA"})
	doc[0].Default = `"0"`
	got := compareKeys(doc, code)
	want := []string{
		fmt.Sprintf("%s: default is %s in the docs, %s in the code", code[1].Name, `"0"`, code[1].Default),
		"session.extra: in docs/config.md but not in the code",
		code[0].Name + ": in the code but not in docs/config.md (run go test ./config -run TestDocsTable -update)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := compareKeys(code, code); len(d) != 0 {
		t.Errorf("identical lists differ: %q", d)
	}
}

// compareKeys lists every difference between the docs' rows and the code's
// keys; empty means they agree.
func compareKeys(doc, code []Key) []string {
	var diffs []string
	byName := map[string]Key{}
	for _, k := range code {
		byName[k.Name] = k
	}
	documented := map[string]bool{}
	for _, d := range doc {
		if documented[d.Name] {
			diffs = append(diffs, d.Name+": documented twice")
		}
		documented[d.Name] = true
		c, ok := byName[d.Name]
		if !ok {
			diffs = append(diffs, d.Name+": in docs/config.md but not in the code")
			continue
		}
		for _, col := range []struct{ name, doc, code string }{
			{"type", d.Type, c.Type},
			{"default", d.Default, c.Default},
			{"environment variable", d.Env, c.Env},
			{"flag", flagCell(d), flagCell(c)},
			{"description", d.Description, c.Description},
			{"validation", d.Allowed, c.Allowed},
		} {
			if col.doc != col.code {
				diffs = append(diffs, fmt.Sprintf("%s: %s is %s in the docs, %s in the code", d.Name, col.name, col.doc, col.code))
			}
		}
	}
	for _, c := range code {
		if !documented[c.Name] {
			diffs = append(diffs, c.Name+": in the code but not in docs/config.md (run go test ./config -run TestDocsTable -update)")
		}
	}
	return diffs
}

// renderTable writes keys as the Markdown table parseTable reads.
func renderTable(keys []Key) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(tableHeader)) + "|\n")
	for _, k := range keys {
		cells := []string{code(k.Name), k.Type, code(k.Default), code(k.Env), flagCell(k), k.Description, k.Allowed}
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

func code(s string) string { return "`" + s + "`" }

// flagCell shows a key's flag, and says when `snodod stdio` lacks it.
func flagCell(k Key) string {
	switch {
	case k.Flag == "":
		return ""
	case k.DaemonOnly:
		return code("--"+k.Flag) + " (serve)"
	}
	return code("--" + k.Flag)
}

// parseTable reads the Markdown table between the markers: a header row as
// tableHeader, a separator, then one row per key.
func parseTable(text string) ([]Key, error) {
	var rows [][]string
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "|") {
			rows = append(rows, splitRow(line))
		}
	}
	if len(rows) < 2 || !slices.Equal(rows[0], tableHeader) {
		return nil, fmt.Errorf("the key table must start with the header | %s |", strings.Join(tableHeader, " | "))
	}
	var keys []Key
	for i, r := range rows[2:] {
		if len(r) != len(tableHeader) {
			return nil, fmt.Errorf("key table row %d has %d cells, want %d", i+1, len(r), len(tableHeader))
		}
		k := Key{
			Name: uncode(r[0]), Type: r[1], Default: uncode(r[2]), Env: uncode(r[3]),
			Description: r[5], Allowed: r[6],
		}
		flagText, serveOnly := strings.CutSuffix(r[4], " (serve)")
		k.Flag, k.DaemonOnly = strings.TrimPrefix(uncode(flagText), "--"), serveOnly
		keys = append(keys, k)
	}
	return keys, nil
}

// splitRow splits "| a | b \| c |" into ["a", "b | c"].
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

func uncode(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return s[1 : len(s)-1]
	}
	return s
}

// section returns the text of doc's "## title" section, up to the next
// section of that level.
func section(doc, title string) string {
	_, rest, _ := strings.Cut(doc, "\n## "+title+"\n")
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// fenced returns the contents of the fenced code blocks of doc whose info
// string is lang, in order.
func fenced(doc, lang string) []string {
	var blocks []string
	var cur *strings.Builder
	indent := "" // the opening fence's, removed from every line
	for line := range strings.Lines(doc) {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```"+lang:
			cur = &strings.Builder{}
			indent = line[:strings.Index(line, "`")]
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// TestDocsExamples loads the examples of docs/config.md: the TOML and the
// YAML example say the same thing, and the error example is what Load
// reports for the mistakes it shows.
func TestDocsExamples(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	examples := section(doc, "Examples") // the entries' sections have examples of their own
	tomls, yamls := fenced(examples, "toml"), fenced(examples, "yaml")
	if len(tomls) != 1 || len(yamls) != 1 {
		t.Fatalf("found %d TOML and %d YAML examples under ## Examples, want one of each", len(tomls), len(yamls))
	}
	fromTOML := mustLoad(t, Options{File: writeFile(t, "config.toml", tomls[0]), Env: testEnv(t)})
	fromYAML := mustLoad(t, Options{File: writeFile(t, "config.yaml", yamls[0]), Env: testEnv(t)})
	if !reflect.DeepEqual(sectionsOf(fromTOML), sectionsOf(fromYAML)) {
		t.Errorf("the examples differ:\nTOML %+v\nYAML %+v", sectionsOf(fromTOML), sectionsOf(fromYAML))
	}

	_, errorsSection, _ := strings.Cut(doc, "\n## Errors\n")
	texts := fenced(errorsSection, "text")
	if len(texts) == 0 {
		t.Fatal("no error example under ## Errors")
	}
	path := writeFile(t, "config.toml", `
[session]
write_timeout = "0s"
write_timout = "1s"
[log]
level = "loud"
[protocol]
versions = ["2025-06-18", "2025-06-18"]
`)
	_, err = Load(Options{File: path, Env: testEnv(t, "SNODOD_EXECUTOR__MAX_QUEUE=-1")})
	if got, want := fmt.Sprint(err), strings.TrimSuffix(texts[0], "\n"); got != want {
		t.Errorf("Load reports:\n%s\nthe docs show:\n%s", got, want)
	}
}

// TestLineLimitProse: session.max_line_bytes counts the newline
// (docs/transport.md §3.1). The key table says so from package limits; this
// catches prose anywhere in the repository (docs, README, the example
// configuration, doc comments, help texts) that says otherwise.
func TestLineLimitProse(t *testing.T) {
	wrong := regexp.MustCompile(`(?i)(without|excluding|not counting|not including|minus) (its|the) (trailing )?newline|newline (is )?not (included|counted)`)
	limit := regexp.MustCompile(`(?i)max_line_bytes|MaxLineBytes|max-line-bytes|line limit|longest (request |input )?line`)
	// Comments and prose wrap: a sentence is read across lines, without
	// the comment markers.
	wrap := regexp.MustCompile(`\s*\n\s*(//|#)?\s*`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".toml", ".yaml", ".service", ".socket":
		default:
			return nil
		}
		if filepath.Base(path) == "docs_test.go" {
			return nil // this test's own pattern
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, sentence := range strings.Split(wrap.ReplaceAllString(string(b), " "), ". ") {
			if wrong.MatchString(sentence) && limit.MatchString(sentence) {
				t.Errorf("%s says the line limit leaves the newline out; it counts it (docs/transport.md §3.1): %q", path, sentence)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
