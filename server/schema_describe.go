package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The failure texts of docs/protocol.md §6.3: a validation error of the
// library reworded as "<property path>: <reason>", quoting the keyword's
// value from the schema.

// describe turns a validation error of the library, a chain of
// "validating <schema path>: " wrappers around a keyword's message, into
// "<property path>: <reason>", e.g. `user.age: expected integer, got
// string`. Failures are rare, so this is not on the hot path.
func (s *schema) describe(err error) string {
	var paths []string
	inner := err
	for {
		next := errors.Unwrap(inner)
		if next == nil {
			break
		}
		prefix := strings.TrimSuffix(inner.Error(), next.Error())
		if p, ok := strings.CutPrefix(prefix, "validating "); ok {
			paths = append(paths, strings.TrimSuffix(p, ": "))
		}
		inner = next
	}
	where := instancePath(paths)
	last := "root"
	if len(paths) > 0 {
		last = paths[len(paths)-1]
	}
	why := s.reason(inner.Error(), last)
	if where == "" {
		return why
	}
	return where + ": " + why
}

// instancePath derives where in the value a failure is from the schema
// paths the validator went through: property names, "[]" or "[i]" for
// array items, ".*" for other members. The path of a $ref's target is not
// a place in the value, so after a jump only what extends it counts.
func instancePath(paths []string) string {
	var b strings.Builder
	prev := ""
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") { // "root", or a $id
			prev = ""
			continue
		}
		if prev == "" || strings.HasPrefix(p, prev+"/") {
			segs := strings.Split(strings.TrimPrefix(p[len(prev):], "/"), "/")
			for i := 0; i < len(segs); i++ {
				next := ""
				if i+1 < len(segs) {
					next = segs[i+1]
				}
				switch segs[i] {
				case "properties":
					b.WriteString("." + unescapePointer(next))
					i++
				case "prefixItems":
					b.WriteString("[" + next + "]")
					i++
				case "items":
					if _, err := strconv.Atoi(next); err == nil { // draft-07 tuple
						b.WriteString("[" + next + "]")
						i++
					} else {
						b.WriteString("[]")
					}
				case "additionalItems", "unevaluatedItems":
					b.WriteString("[]")
				case "additionalProperties", "unevaluatedProperties", "patternProperties":
					b.WriteString(".*")
					if segs[i] == "patternProperties" {
						i++
					}
				case "$defs", "definitions", "dependentSchemas", "dependencies", "allOf", "anyOf", "oneOf":
					i++ // the member name or index that follows is no place in the value
				}
			}
		}
		prev = p
	}
	return strings.TrimPrefix(b.String(), ".")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// quoted matches the Go-quoted strings in a library message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// names returns the Go-quoted strings in msg, unquoted and joined by ", ".
func names(msg string) string {
	var out []string
	for _, q := range quoted.FindAllString(msg, -1) {
		if u, err := strconv.Unquote(q); err == nil {
			out = append(out, u)
		}
	}
	return strings.Join(out, ", ")
}

// reasonFormats word the failures of keywords that have a value to quote.
var reasonFormats = map[string]string{
	"const":            "must be %s",
	"minimum":          "must be >= %s",
	"maximum":          "must be <= %s",
	"exclusiveMinimum": "must be > %s",
	"exclusiveMaximum": "must be < %s",
	"multipleOf":       "must be a multiple of %s",
	"minLength":        "must have at least %s characters",
	"maxLength":        "must have at most %s characters",
	"pattern":          "must match the pattern %s",
	"minItems":         "must have at least %s items",
	"maxItems":         "must have at most %s items",
	"minProperties":    "must have at least %s properties",
	"maxProperties":    "must have at most %s properties",
	"minContains":      "must contain at least %s matching items",
	"maxContains":      "must contain at most %s matching items",
}

var typeMessage = regexp.MustCompile(`has type "([a-z]+)", want (?:one of )?"([^"]*)"$`)

// reason rewords a keyword message of the library, quoting the keyword's
// value from the subschema at path when it can be found; a message it does
// not know is kept as it is.
func (s *schema) reason(msg, path string) string {
	keyword, _, _ := strings.Cut(msg, ":")
	switch keyword {
	case "type":
		if m := typeMessage.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("expected %s, got %s", strings.ReplaceAll(m[2], ", ", " or "), m[1])
		}
	case "enum":
		if values, ok := s.keyword(path, keyword).([]any); ok {
			list := make([]string, 0, len(values))
			for _, v := range values {
				b, _ := json.Marshal(v)
				list = append(list, string(b))
			}
			return "must be one of " + strings.Join(list, ", ")
		}
		return "must be one of the allowed values"
	case "required":
		return "missing required properties: " + names(msg)
	case "uniqueItems":
		return "items must be unique"
	case "contains":
		return "must contain a matching item"
	case "anyOf":
		return "must match at least one of the schemas in anyOf"
	case "oneOf":
		return "must match exactly one of the schemas in oneOf"
	case "not":
		return "must not match the schema in not"
	}
	if format, ok := reasonFormats[keyword]; ok {
		if v := s.keyword(path, keyword); v != nil {
			b, _ := json.Marshal(v)
			return fmt.Sprintf(format, b)
		}
	}
	if strings.HasPrefix(msg, "unexpected additional properties") {
		return "unexpected properties: " + names(msg)
	}
	if dependent, missing, ok := strings.Cut(msg, "]: missing properties"); ok && strings.HasPrefix(msg, "dependentRequired[") {
		return fmt.Sprintf("%s requires %s", names(dependent), names(missing))
	}
	return msg
}

// keyword returns the decoded value of keyword in the subschema at the
// validator's path ("root" or a JSON Pointer), or nil when not found.
func (s *schema) keyword(path, keyword string) any {
	node := s.doc
	if path != "root" {
		if !strings.HasPrefix(path, "/") {
			return nil
		}
		for _, seg := range strings.Split(path[1:], "/") {
			switch n := node.(type) {
			case map[string]any:
				node = n[unescapePointer(seg)]
			case []any:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(n) {
					return nil
				}
				node = n[i]
			default:
				return nil
			}
		}
	}
	if m, ok := node.(map[string]any); ok {
		return m[keyword]
	}
	return nil
}
