package catalog

import (
	"bytes"
	"mime"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// extensionTypes are the MIME types of the extensions notes and code
// folders hold, so that they do not depend on the machine's mime.types
// (which mime.TypeByExtension reads for the others).
var extensionTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".text": "text/plain",
	".rst": "text/x-rst", ".org": "text/x-org", ".adoc": "text/asciidoc", ".tex": "text/x-tex",
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".log": "text/plain",
	".html": "text/html", ".htm": "text/html", ".css": "text/css", ".xml": "application/xml",
	".json": "application/json", ".jsonl": "application/jsonl", ".ndjson": "application/x-ndjson",
	".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml",
	".ini": "text/plain", ".conf": "text/plain", ".cfg": "text/plain", ".env": "text/plain",
	".go": "text/x-go", ".py": "text/x-python", ".rs": "text/x-rust", ".c": "text/x-c", ".h": "text/x-c",
	".cc": "text/x-c++", ".cpp": "text/x-c++", ".hpp": "text/x-c++", ".java": "text/x-java",
	".js": "text/javascript", ".mjs": "text/javascript", ".ts": "text/x-typescript", ".tsx": "text/x-typescript",
	".sh": "application/x-sh", ".bash": "application/x-sh", ".rb": "text/x-ruby", ".sql": "application/sql",
	".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp", ".ico": "image/vnd.microsoft.icon",
	".pdf": "application/pdf", ".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar",
	".mp3": "audio/mpeg", ".wav": "audio/wav", ".ogg": "audio/ogg", ".mp4": "video/mp4", ".webm": "video/webm",
}

// typeByExtension returns the MIME type of name's extension, without
// parameters, or "".
func typeByExtension(name string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if t, ok := extensionTypes[ext]; ok {
		return t
	}
	if ext == "" {
		return ""
	}
	t, _, _ := mime.ParseMediaType(mime.TypeByExtension(ext))
	return t
}

// contentType decides how a file is served: its MIME type (by extension,
// else by content), and whether it goes as text (valid UTF-8 of a textual
// type) or as a blob.
func contentType(name string, data []byte) (mimeType string, text bool) {
	mimeType = typeByExtension(name)
	if mimeType == "" {
		mimeType, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	looksText := utf8.Valid(data) && bytes.IndexByte(data, 0) < 0
	switch {
	case !looksText:
		if textual(mimeType) {
			mimeType = "application/octet-stream" // the name says text; the bytes do not
		}
		return mimeType, false
	case textual(mimeType):
		return mimeType, true
	case mimeType == "application/octet-stream":
		return "text/plain", true // no type known, and valid UTF-8
	}
	return mimeType, false
}

// textual reports whether a MIME type is text a client can show as such.
func textual(t string) bool {
	if strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "+json") || strings.HasSuffix(t, "+xml") {
		return true
	}
	switch path.Base(t) {
	case "json", "jsonl", "x-ndjson", "xml", "yaml", "toml", "x-sh", "sql", "javascript":
		return strings.HasPrefix(t, "application/")
	}
	return false
}
