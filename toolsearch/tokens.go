package toolsearch

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokens splits s into its search terms: runs of letters and digits, cut
// again where a lower-case letter or a digit meets an upper-case one
// (readTextFile, HTTPServer → http server) and between letters and
// digits, lower-cased, stop words dropped, each stemmed and mapped
// through the synonym table.
func Tokens(s string) []string {
	var out []string
	start := -1
	flush := func(end int) {
		if start >= 0 {
			out = appendWord(out, s[start:end])
			start = -1
		}
	}
	var prev rune
	for i, r := range s {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		if !word {
			flush(i)
			prev = r
			continue
		}
		if start >= 0 && boundary(prev, r, s[i+utf8.RuneLen(r):]) {
			flush(i)
		}
		if start < 0 {
			start = i
		}
		prev = r
	}
	flush(len(s))
	return out
}

// queryTokens are the terms of a query: its Tokens, and "file" when it
// names one by its name (config.yaml, notes.md), as users do where a
// tool's definition says "file".
func queryTokens(q string) []string {
	out := Tokens(q)
	if fileName.MatchString(q) {
		out = append(out, "file")
	}
	return out
}

// fileName is a word with a short extension: a file's name.
var fileName = regexp.MustCompile(`[A-Za-z0-9_-]\.[A-Za-z][A-Za-z0-9]{0,4}\b`)

// boundary reports whether a word ends between prev and r, where rest
// follows r: lower → Upper, letter ↔ digit, and the last capital of an
// acronym before a capitalized word (HTTPServer: HTTP | Server).
func boundary(prev, r rune, rest string) bool {
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(r):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(r):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(r):
		next, _ := utf8.DecodeRuneInString(rest)
		return unicode.IsLower(next)
	}
	return false
}

func appendWord(out []string, w string) []string {
	w = strings.ToLower(w)
	if stopWords[w] {
		return out
	}
	w = stem(w)
	if syn, ok := synonyms[w]; ok {
		w = syn
	}
	return append(out, w)
}

// stem strips the English suffixes that part a tool's words from a
// user's (files, directories, reading, created): a few rules, applied
// only where enough of the word is left, not a full Porter stemmer, whose
// stems (directori) would make the synonym table harder to read.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:n-3] + "y"
	case n > 4 && strings.HasSuffix(w, "sses"):
		return w[:n-2]
	case n > 5 && strings.HasSuffix(w, "ing"):
		return undouble(w[:n-3])
	case n > 4 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		return undouble(w[:n-2])
	case n > 3 && strings.HasSuffix(w, "es") && (strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "ches")):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

// undouble turns the stem of running, stopped into run, stop, and puts
// back the e of writing, creating (writ → write is left to the synonym
// table: a rule would get it wrong as often as right).
func undouble(w string) string {
	n := len(w)
	if n >= 2 && w[n-1] == w[n-2] && !strings.ContainsRune("lsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// stopWords carry no meaning for ranking tools: articles, pronouns,
// auxiliaries and the politeness of a request ("could you please …").
var stopWords = set("a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "from", "by", "with", "into", "as",
	"is", "are", "be", "been", "was", "were", "it", "its", "this", "that", "these", "those", "there", "here",
	"i", "me", "my", "we", "our", "you", "your", "us", "them", "they", "their",
	"do", "does", "did", "can", "could", "would", "should", "will", "shall", "may", "might", "must",
	"please", "want", "need", "like", "some", "any", "all", "what", "which", "who", "whom", "how", "when", "where", "why",
	"if", "then", "than", "so", "just", "also", "about", "up", "out", "not", "no", "yes", "use", "using", "used")

// synonyms map a stemmed word to the one tool definitions use more: the
// words users and servers spell differently for the same act or thing.
var synonyms = map[string]string{
	"folder": "directory", "dir": "directory", "mkdir": "directory",
	"remove": "delete", "erase": "delete", "rm": "delete", "drop": "delete",
	"rename": "move", "mv": "move", "relocate": "move",
	"writ": "write", "save": "write", "overwrite": "write",
	"modify": "edit", "change": "edit", "patch": "edit", "replace": "edit",
	"show": "list", "ls": "list",
	"find": "search", "lookup": "search", "grep": "search", "locate": "search",
	"sleep": "wait", "pause": "wait",
	"plus": "sum", "addition": "sum", "total": "sum",
	"forget": "delete", "remember": "memory", "memorize": "memory", "know": "knowledge",
	"picture": "image", "photo": "image", "png": "image",
	"metadata": "info", "information": "info", "stat": "info", "detail": "info",
	"compress": "gzip", "zip": "gzip",
	"environment": "env", "variable": "env",
	"creat": "create", "new": "create", "make": "create",
	"relationship": "relation",
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}
