package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fields reads the table of one entry ([tools.grep_notes]) field by field.
// Each getter names a field, which makes it known, converts its value and,
// when the value is wrong, records a problem keyed by the field's dotted
// path ("tools.grep_notes.timeout") with the same "<allowed>, got <value>"
// wording as the keyed sections. done reports every field no getter asked
// for as unknown, with a suggestion among the known ones. A fields is used
// by one decode at a time.
type fields struct {
	prefix   string // the entry's dotted path: "tools.grep_notes"
	table    map[string]any
	src      Source
	known    []string
	problems *[]Problem
}

// entryFields returns the reader of entry name of section (a table), or
// records that v is not a table and returns nil.
func entryFields(section, name string, v any, src Source, problems *[]Problem) *fields {
	prefix := section + "." + name
	table, ok := v.(map[string]any)
	if !ok {
		*problems = append(*problems, Problem{Key: prefix, Source: src, Message: "must be a table of fields, got " + literal(v)})
		return nil
	}
	return &fields{prefix: prefix, table: table, src: src, problems: problems}
}

// sub returns the reader of the table in field name (known from now on),
// or nil when the field is absent; a value that is not a table is a
// problem, and nil too.
func (f *fields) sub(name string) *fields {
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	table, ok := v.(map[string]any)
	if !ok {
		f.problem(name, "must be a table, got "+literal(v))
		return nil
	}
	return &fields{prefix: f.key(name), table: table, src: f.src, problems: f.problems}
}

// key is the dotted path of field name.
func (f *fields) key(name string) string { return f.prefix + "." + name }

// problem records an error about field name ("" for the entry itself).
func (f *fields) problem(name, message string) {
	key := f.prefix
	if name != "" {
		key = f.key(name)
	}
	*f.problems = append(*f.problems, Problem{Key: key, Message: message, Source: f.src})
}

// warn records a warning about field name: reported by config check and
// logged by the daemon, but the configuration still loads.
func (f *fields) warn(name, message string) {
	*f.problems = append(*f.problems, Problem{Key: f.key(name), Message: message, Source: f.src, Warning: true})
}

// get marks name known and returns its value; a null (YAML's "field:"
// with nothing after it) is absent.
func (f *fields) get(name string) (any, bool) {
	if !slices.Contains(f.known, name) {
		f.known = append(f.known, name)
	}
	v, ok := f.table[name]
	return v, ok && v != nil
}

// has reports whether field name is given, marking it known.
func (f *fields) has(name string) bool {
	_, ok := f.get(name)
	return ok
}

func (f *fields) str(name, def string) string {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	s, ok := toString(v)
	if !ok {
		f.problem(name, "must be a string, got "+literal(v))
		return def
	}
	return s
}

// strs reads a list of strings; a single string is refused rather than
// read as one entry, because it is usually a list written wrong.
func (f *fields) strs(name string, def []string) []string {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	items, isList := v.([]any)
	var out []string
	for _, it := range items {
		s, ok := toString(it)
		if !ok {
			isList = false
			break
		}
		out = append(out, s)
	}
	if !isList {
		f.problem(name, "must be a list of strings, got "+literal(v))
		return def
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func (f *fields) boolean(name string, def bool) bool {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		f.problem(name, "must be true or false, got "+literal(v))
		return def
	}
	return b
}

// positiveDuration reads a duration > 0: text such as "30s".
func (f *fields) positiveDuration(name string, def time.Duration) time.Duration {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	d, ok := toDuration(v)
	if !ok || d <= 0 {
		allowed := "must be a positive duration"
		if unitless(v) {
			allowed += ` with a unit, such as "30s"`
		}
		f.problem(name, allowed+", got "+literal(v))
		return def
	}
	return d
}

// positiveInt reads an integer >= 1; text is refused, as a file writes
// numbers bare.
func (f *fields) positiveInt(name string, def int) int {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	n, ok := toInt(v)
	if _, text := v.(string); text || !ok || n < 1 {
		f.problem(name, "must be a positive integer, got "+literal(v))
		return def
	}
	return n
}

// oneOf reads a string that must be one of values.
func (f *fields) oneOf(name, def string, values ...string) string {
	s := f.str(name, def)
	if !slices.Contains(values, s) {
		f.problem(name, "must be "+join(quoteAll(values), "or")+", got "+literal(s))
		return def
	}
	return s
}

// knownFields, when set (by the docs test), is told each table's known
// fields as it is done, so the test can compare them with docs/config.md.
var knownFields func(prefix string, known []string)

// done reports the fields of the table no getter asked for.
func (f *fields) done() {
	if knownFields != nil {
		knownFields(f.prefix, f.known)
	}
	for _, name := range slices.Sorted(maps.Keys(f.table)) {
		if slices.Contains(f.known, name) {
			continue
		}
		*f.problems = append(*f.problems, Problem{Key: f.key(name), Source: f.src, Unknown: true,
			Message: fmt.Sprintf("unknown field %q in %s", name, f.prefix) + didYouMean(nearest(name, f.known), strconv.Quote)})
	}
}

// nearest returns the one candidate within two edits of name (ignoring
// case, and - for _), if exactly one is closest.
func nearest(name string, candidates []string) []string {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	var near []string
	best := 3
	for _, c := range candidates {
		switch d := distance(n, strings.ToLower(c)); {
		case d < best:
			best, near = d, []string{c}
		case d == best:
			near = append(near, c)
		}
	}
	if len(near) == 1 && best < max(len(n)/2, 2) {
		return near
	}
	var longer []string // readOnly for readOnlyHint
	for _, c := range candidates {
		if len(n) >= 3 && strings.HasPrefix(strings.ToLower(c), n) {
			longer = append(longer, c)
		}
	}
	if len(longer) == 1 {
		return longer
	}
	return nil
}

func quoteAll(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = strconv.Quote(v)
	}
	return out
}

// eachEntry decodes every entry of section's table, in name order, with
// decode, after checking the entry's name (kind words it: "tool"), and
// reports the fields decode did not read.
func eachEntry(section, kind string, ctx entryContext, table map[string]any, decode func(f *fields, name string)) []Problem {
	var problems []Problem
	for _, name := range slices.Sorted(maps.Keys(table)) {
		f := entryFields(section, name, table[name], ctx.Source, &problems)
		if f == nil {
			continue
		}
		if !entryName.MatchString(name) {
			f.problem("", "is not a valid "+kind+" name: "+entryNameRule)
		}
		decode(f, name)
		f.done()
	}
	return problems
}

// entryName is what the names of tools, prompts and arguments may be:
// letters, digits, _, - and ., as MCP recommends for tool names, at most
// 64 bytes, so that they fit in an aggregated view's composed names.
var entryName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

const entryNameRule = "names may use only letters, digits, _, - and ., at most 64 of them"
